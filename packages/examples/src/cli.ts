/**
 * The command lines of the examples: the parser the benchmarks use too (`node:util` `parseArgs`
 * in strict mode, an unknown or misspelt flag refused with the valid ones listed, `--help`),
 * kept in the private testing package so that neither suite imports the other.
 */
export {
  type CommandLine,
  CommandLineError,
  type CommandLineOption,
  type CommandLineOptions,
  type CommandLineSpec,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '@cuda-tasks/testing/cli';
