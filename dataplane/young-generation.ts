// Imported first by main.ts: keeps V8's young generation at its initial size (1 MiB semi-spaces)
// instead of letting it grow to 16 MiB each under allocation. The data plane's JavaScript is off
// the notification path (the engine answers natively), so the larger young generation bought
// little and cost every node about 2 MiB at rest and 5 MiB under load (docs/benchmarks.md,
// "Young generation"). A Node command line or NODE_OPTIONS that sets a semi-space flag wins.
import { setFlagsFromString } from 'node:v8';

// V8 takes its flags with dashes or underscores.
const SEMI_SPACE_FLAG = /--(max|min)[-_]semi[-_]space[-_]size|--semi[-_]space[-_]growth[-_]factor/;

if (!SEMI_SPACE_FLAG.test([...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' '))) {
  setFlagsFromString('--semi-space-growth-factor=1');
}
