/**
 * The program of docs/getting-started.md, as written there: the fenced blocks whose info
 * string names a file (```` ```ts file=main.ts ````) or an expected output with its exit code
 * (```` ```text output=no-gpu exit=1 ````). `pnpm check:packages` type-checks and runs the
 * program against the packed tarballs and compares what it prints and how it exits.
 */

/** What a program is expected to print (stdout and stderr together) and its exit code. */
export interface ExpectedOutput {
  /** The text, as in the block (ending in a newline). */
  text: string;
  /** The exit code (`exit=N`; 0 when not given). */
  exitCode: number;
}

/** What the guide holds: its files by name and its expected outputs by kind. */
export interface GuideBlocks {
  /** `file=NAME` blocks: name to content. */
  files: Record<string, string>;
  /** `output=KIND` blocks: kind (`gpu`, `no-gpu`) to the output. */
  outputs: Record<string, ExpectedOutput>;
}

/**
 * The marked fenced blocks of a markdown text; a name given twice is an error.
 * @example guideBlocks(readFileSync('docs/getting-started.md', 'utf8')).files['main.ts'];
 */
export function guideBlocks(markdown: string): GuideBlocks {
  const blocks: GuideBlocks = { files: {}, outputs: {} };
  const fence = /^```[\w-]*((?:[ \t]+[\w-]+=\S+)+)[ \t]*\n([\s\S]*?)^```[ \t]*$/gm;
  for (const [, info, content] of markdown.matchAll(fence)) {
    const attributes = Object.fromEntries(
      info!
        .trim()
        .split(/[ \t]+/)
        .map((pair) => pair.split('=', 2) as [string, string]),
    );
    if (attributes.file !== undefined) {
      if (Object.hasOwn(blocks.files, attributes.file)) {
        throw new Error(`the guide has two file=${attributes.file} blocks`);
      }
      blocks.files[attributes.file] = content!;
    } else if (attributes.output !== undefined) {
      if (Object.hasOwn(blocks.outputs, attributes.output)) {
        throw new Error(`the guide has two output=${attributes.output} blocks`);
      }
      blocks.outputs[attributes.output] = {
        text: content!,
        exitCode: Number(attributes.exit ?? 0),
      };
    }
  }
  return blocks;
}
