// The reflection index against @bufbuild/protobuf's own reading of the same descriptor sets (every
// message, enum and service it knows is found in its file), and the answers a stream gets; the
// wire is covered by test/integration/grpc-reflection.test.ts (buf curl, and a v1alpha client).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { AgentError } from '../common/errors';
import { ROOT } from '../test/support/paths';
import { fileDescriptorsOf, ReflectionIndex } from './grpc-reflection';

const SETS = ['seccompagent.binpb', 'health.binpb'].map((name) => fs.readFileSync(path.join(ROOT, 'proto', 'gen', name)));
const index = new ReflectionIndex(SETS.flatMap((set) => fileDescriptorsOf(set)));

test('reflection index: every message, enum, service and method that @bufbuild/protobuf reads is found in its own file', () => {
  let checked = 0;
  for (const set of SETS) {
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, set));
    for (const file of registry.files) {
      const fileName = `${file.name}.proto`;
      const symbols: string[] = [];
      const walk = (messages: typeof file.messages) => {
        for (const message of messages) {
          symbols.push(message.typeName, ...message.nestedEnums.map((e) => e.typeName));
          walk(message.nestedMessages);
        }
      };
      walk(file.messages);
      symbols.push(...file.enums.map((e) => e.typeName));
      for (const service of file.services) symbols.push(service.typeName, ...service.methods.map((m) => `${service.typeName}.${m.name}`));
      for (const symbol of symbols) {
        assert.equal(index.fileContaining(symbol), fileName, symbol);
        assert.equal(index.fileContaining(`.${symbol}`), fileName, `.${symbol}`);
        checked++;
      }
    }
  }
  assert.ok(checked > 50, `only ${checked} symbols checked`);
  assert.deepEqual([...index.services].sort(), ['grpc.health.v1.Health', 'seccompagent.v1.DataPlane']);
});

test('reflection index: a file comes with every file it imports, transitively, each once', () => {
  const file = index.fileContaining('seccompagent.v1.DataPlane')!;
  const answer = index.answer({ host: 'h', messageRequest: { $case: 'fileByFilename', fileByFilename: file } });
  assert.equal(answer.validHost, 'h');
  assert.equal(answer.messageResponse?.$case, 'fileDescriptorResponse');
  const names = answer.messageResponse.fileDescriptorResponse.fileDescriptorProto.map((bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name);
  assert.equal(new Set(names).size, names.length, `a file sent twice: ${names}`);
  assert.equal(names[0], file);
  for (const wkt of ['google/protobuf/duration.proto', 'google/protobuf/timestamp.proto']) assert.ok(names.includes(wkt), `${wkt} missing: ${names}`);
});

test('reflection index: unknown names are NOT_FOUND errors on the stream, list_services lists both services', () => {
  for (const messageRequest of [
    { $case: 'fileByFilename' as const, fileByFilename: 'nope.proto' },
    { $case: 'fileContainingSymbol' as const, fileContainingSymbol: 'seccompagent.v1.Nope' },
    { $case: 'allExtensionNumbersOfType' as const, allExtensionNumbersOfType: 'seccompagent.v1.Nope' },
    { $case: 'fileContainingExtension' as const, fileContainingExtension: { containingType: 'seccompagent.v1.Event', extensionNumber: 100 } },
  ]) {
    const answer = index.answer({ host: '', messageRequest });
    assert.equal(answer.messageResponse?.$case, 'errorResponse', messageRequest.$case);
    assert.equal(answer.messageResponse.errorResponse.errorCode, status.NOT_FOUND);
    assert.deepEqual(answer.originalRequest?.messageRequest, messageRequest);
  }
  const list = index.answer({ host: '', messageRequest: { $case: 'listServices', listServices: '*' } });
  assert.equal(list.messageResponse?.$case, 'listServicesResponse');
  assert.deepEqual(list.messageResponse.listServicesResponse.service.map((s) => s.name).sort(), ['grpc.health.v1.Health', 'seccompagent.v1.DataPlane']);
  const extensions = index.answer({ host: '', messageRequest: { $case: 'allExtensionNumbersOfType', allExtensionNumbersOfType: 'seccompagent.v1.Event' } });
  assert.deepEqual(extensions.messageResponse, { $case: 'allExtensionNumbersResponse', allExtensionNumbersResponse: { baseTypeName: 'seccompagent.v1.Event', extensionNumber: [] } });
  assert.equal(index.answer({ host: '', messageRequest: undefined }).messageResponse?.$case, 'errorResponse');
});

test('reflection index: bytes that are not a FileDescriptorSet are refused with the command that makes one', () => {
  assert.throws(() => fileDescriptorsOf(Buffer.from([0x10, 0x01])), (err: unknown) => err instanceof AgentError && /npm run gen/.test(err.message));
});

