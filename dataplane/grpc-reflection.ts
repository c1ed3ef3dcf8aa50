// gRPC server reflection (grpc.reflection.v1 and v1alpha, the same messages under two names) from
// the FileDescriptorProtos that `buf build` wrote: grpcurl and `buf curl` work on the data plane's
// sockets without a .proto file. Served from the descriptors' bytes as buf compiled them, with an
// index of the symbols each file defines, read once at start; no descriptor library is loaded
// (protobufjs, which @grpc/reflection brings, was a fifth of the data plane's resident memory).
import * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { AgentError } from '../common/errors';
import {
  ServerReflectionService,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../proto/gen/grpc/reflection/v1/reflection';

/**
 * The FileDescriptorProtos of a FileDescriptorSet (field 1, repeated, length-delimited).
 * proto-loader rebuilds descriptors per package and drops their imports, which leaves
 * reflection clients (grpcurl, buf curl) unable to resolve google.protobuf types; the set that
 * buf compiled has them right.
 */
export function fileDescriptorsOf(set: Uint8Array): Uint8Array[] {
  const reader = new BinaryReader(set);
  const files: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field !== 1 || wireType !== WireType.LengthDelimited) {
      throw new AgentError('EDESCRIPTOR_SET', `not a FileDescriptorSet: unexpected field ${field}; run npm run gen`);
    }
    files.push(reader.bytes());
  }
  return files;
}

interface IndexedFile {
  name: string;
  dependencies: string[];
  bytes: Uint8Array;
}

// Field numbers of descriptor.proto that name symbols.
const FILE = { name: 1, package: 2, dependency: 3, messageType: 4, enumType: 5, service: 6, extension: 7 } as const;
const MESSAGE = { name: 1, nestedType: 3, enumType: 4, extension: 6 } as const;
const SERVICE = { name: 1, method: 2 } as const;
const NAMED = { name: 1 } as const;

/** Reads the fields of one message, giving each length-delimited one to `visit` (others skipped). */
function forEachField(bytes: Uint8Array, visit: (field: number, reader: BinaryReader) => boolean): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (wireType !== WireType.LengthDelimited || !visit(field, reader)) reader.skip(wireType, field);
  }
}

function nameOf(bytes: Uint8Array): string {
  let name = '';
  forEachField(bytes, (field, reader) => {
    if (field !== NAMED.name) return false;
    name = reader.string();
    return true;
  });
  return name;
}

/** Every fully qualified symbol a descriptor file defines, and the services among them. */
export class ReflectionIndex {
  private readonly files = new Map<string, IndexedFile>();
  private readonly fileOfSymbol = new Map<string, string>();
  readonly services: string[] = [];

  constructor(fileDescriptorProtos: Uint8Array[]) {
    for (const bytes of fileDescriptorProtos) this.add(bytes);
  }

  private add(bytes: Uint8Array): void {
    const file: IndexedFile = { name: '', dependencies: [], bytes };
    let prefix = '';
    const messages: Uint8Array[] = [];
    const enums: Uint8Array[] = [];
    const services: Uint8Array[] = [];
    const extensions: Uint8Array[] = [];
    forEachField(bytes, (field, reader) => {
      switch (field) {
        case FILE.name: file.name = reader.string(); return true;
        case FILE.package: prefix = `${reader.string()}.`; return true;
        case FILE.dependency: file.dependencies.push(reader.string()); return true;
        case FILE.messageType: messages.push(reader.bytes()); return true;
        case FILE.enumType: enums.push(reader.bytes()); return true;
        case FILE.service: services.push(reader.bytes()); return true;
        case FILE.extension: extensions.push(reader.bytes()); return true;
        default: return false;
      }
    });
    if (prefix === '.') prefix = '';
    const define = (symbol: string) => this.fileOfSymbol.set(symbol, file.name);
    const defineMessage = (message: Uint8Array, scope: string) => {
      const name = `${scope}${nameOf(message)}`;
      define(name);
      forEachField(message, (field, reader) => {
        if (field === MESSAGE.nestedType) defineMessage(reader.bytes(), `${name}.`);
        else if (field === MESSAGE.enumType || field === MESSAGE.extension) define(`${name}.${nameOf(reader.bytes())}`);
        else return false;
        return true;
      });
    };
    for (const message of messages) defineMessage(message, prefix);
    for (const item of [...enums, ...extensions]) define(`${prefix}${nameOf(item)}`);
    for (const service of services) {
      const name = `${prefix}${nameOf(service)}`;
      define(name);
      this.services.push(name);
      forEachField(service, (field, reader) => {
        if (field !== SERVICE.method) return false;
        define(`${name}.${nameOf(reader.bytes())}`);
        return true;
      });
    }
    this.files.set(file.name, file);
  }

  /** The file named, then every file it imports, transitively, each once; undefined: unknown. */
  fileWithDependencies(name: string): Uint8Array[] | undefined {
    if (!this.files.has(name)) return undefined;
    const out: Uint8Array[] = [];
    const seen = new Set<string>();
    const visit = (fileName: string) => {
      const file = this.files.get(fileName);
      if (file === undefined || seen.has(fileName)) return;
      seen.add(fileName);
      out.push(file.bytes);
      file.dependencies.forEach(visit);
    };
    visit(name);
    return out;
  }

  fileContaining(symbol: string): string | undefined {
    return this.fileOfSymbol.get(symbol.replace(/^\./, ''));
  }

  /** The answer to one request of a ServerReflectionInfo stream. */
  answer(request: ServerReflectionRequest): ServerReflectionResponse {
    const base = { validHost: request.host, originalRequest: request };
    const notFound = (message: string): ServerReflectionResponse => ({
      ...base, messageResponse: { $case: 'errorResponse', errorResponse: { errorCode: status.NOT_FOUND, errorMessage: message } },
    });
    const files = (name: string | undefined, what: string) => {
      const found = name === undefined ? undefined : this.fileWithDependencies(name);
      if (found === undefined) return notFound(`${what} not found`);
      return { ...base, messageResponse: { $case: 'fileDescriptorResponse' as const, fileDescriptorResponse: { fileDescriptorProto: found.map((b) => Buffer.from(b)) } } };
    };
    const asked = request.messageRequest;
    switch (asked?.$case) {
      case 'listServices':
        return { ...base, messageResponse: { $case: 'listServicesResponse', listServicesResponse: { service: this.services.map((name) => ({ name })) } } };
      case 'fileByFilename':
        return files(asked.fileByFilename, `file ${asked.fileByFilename}`);
      case 'fileContainingSymbol':
        return files(this.fileContaining(asked.fileContainingSymbol), `symbol ${asked.fileContainingSymbol}`);
      case 'allExtensionNumbersOfType': {
        // No file here declares extensions: a known message has none.
        if (this.fileContaining(asked.allExtensionNumbersOfType) === undefined) return notFound(`type ${asked.allExtensionNumbersOfType} not found`);
        return { ...base, messageResponse: { $case: 'allExtensionNumbersResponse', allExtensionNumbersResponse: { baseTypeName: asked.allExtensionNumbersOfType, extensionNumber: [] } } };
      }
      case 'fileContainingExtension':
        return notFound(`extension ${asked.fileContainingExtension.extensionNumber} of ${asked.fileContainingExtension.containingType} not found`);
      default:
        return { ...base, messageResponse: { $case: 'errorResponse', errorResponse: { errorCode: status.INVALID_ARGUMENT, errorMessage: 'no request in the message' } } };
    }
  }

  /** Serves grpc.reflection.v1 and grpc.reflection.v1alpha (older grpcurl asks the latter). */
  addTo(server: grpc.Server): void {
    const method = ServerReflectionService.serverReflectionInfo;
    const handler = (call: grpc.ServerDuplexStream<ServerReflectionRequest, ServerReflectionResponse>) => {
      // One answer buffered at most: a client that asks without reading is not read either (HTTP/2
      // flow control holds it), so it cannot grow this process by its answers.
      call.on('data', (request: ServerReflectionRequest) => {
        if (call.write(this.answer(request))) return;
        call.pause();
        call.once('drain', () => call.resume());
      });
      call.on('end', () => call.end());
      call.on('error', () => call.end());
    };
    for (const name of ['grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection']) {
      const definition = { serverReflectionInfo: { ...method, path: `/${name}/ServerReflectionInfo` } };
      server.addService(definition as unknown as grpc.ServiceDefinition, { serverReflectionInfo: handler });
    }
  }
}
