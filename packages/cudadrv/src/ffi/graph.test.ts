import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { findCudaHeader } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import {
  CU_EVENT_WAIT_EXTERNAL,
  CU_GRAPH_EXEC_UPDATE_RESULT_NAMES,
  CU_STREAM_CAPTURE_MODE_RELAXED,
  CU_STREAM_CAPTURE_STATUS_ACTIVE,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED,
  CU_STREAM_CAPTURE_STATUS_NONE,
  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
} from './graph.js';

const headerDirectory = findCudaHeader('cuda.h');

/** The koffi prototypes declared in graph.ts: name -> parameter count. */
function declaredPrototypes(): Map<string, number> {
  const source = readFileSync(fileURLToPath(new URL('./graph.ts', import.meta.url)), 'utf8');
  const prototypes = new Map<string, number>();
  for (const match of source.matchAll(/lib\.func\(\s*'int (\w+)\(([^)]*)\)'/g)) {
    const parameters = match[2]!.trim();
    prototypes.set(match[1]!, parameters === '' ? 0 : parameters.split(',').length);
  }
  return prototypes;
}

describe.runIf(headerDirectory !== undefined)('the graph bindings against cuda.h', () => {
  const header = () => readFileSync(`${headerDirectory}/cuda.h`, 'utf8');

  function enumValue(source: string, name: string): number {
    const match = new RegExp(`\\b${name}\\s*=\\s*(0x[0-9a-fA-F]+|\\d+)`).exec(source);
    if (match === null) throw new Error(`${name} not found`);
    return Number(match[1]);
  }

  /**
   * The parameter count of the function cuda.h declares under `exported`: the header declares
   * a `_v2` entry point under its plain name and #defines the plain name to it, so look for
   * `CUresult CUDAAPI <name>(` for every name that maps to `exported`.
   */
  function headerParameterCount(source: string, exported: string): number {
    const names = new Set([exported]);
    for (const match of source.matchAll(/#define\s+(\w+)\s+(?:__CUDA_API_PTSZ\()?(\w+)\)?/g)) {
      if (match[2] === exported) names.add(match[1]!);
    }
    for (const name of names) {
      const declaration = new RegExp(`CUresult CUDAAPI ${name}\\(([^)]*)\\);`).exec(source);
      if (declaration !== null) {
        const parameters = declaration[1]!.trim();
        return parameters === 'void' || parameters === '' ? 0 : parameters.split(',').length;
      }
    }
    throw new Error(`no declaration of ${exported} (or a name #defined to it) in cuda.h`);
  }

  it('declares each exported entry point with the header parameter count', () => {
    const source = header();
    const declared = declaredPrototypes();
    expect(declared.size).toBeGreaterThanOrEqual(12);
    for (const [name, count] of declared) {
      expect(headerParameterCount(source, name), name).toBe(count);
    }
  });

  it('binds the versioned names cuda.h maps the plain names to', () => {
    const source = header();
    const declared = declaredPrototypes();
    for (const [plain, exported] of [
      ['cuStreamBeginCapture', 'cuStreamBeginCapture_v2'],
      ['cuGraphInstantiate', 'cuGraphInstantiateWithFlags'],
      ['cuGraphExecUpdate', 'cuGraphExecUpdate_v2'],
      ['cuStreamGetCaptureInfo', 'cuStreamGetCaptureInfo_v3'],
    ] as const) {
      expect(source).toMatch(
        new RegExp(`#define\\s+${plain}\\s+(__CUDA_API_PTSZ\\()?${exported}\\b`),
      );
      expect(declared.has(exported), exported).toBe(true);
    }
  });

  it('uses the enum values of cuda.h', () => {
    const source = header();
    const values: Record<string, number> = {
      CU_STREAM_CAPTURE_MODE_RELAXED,
      CU_STREAM_CAPTURE_STATUS_NONE,
      CU_STREAM_CAPTURE_STATUS_ACTIVE,
      CU_STREAM_CAPTURE_STATUS_INVALIDATED,
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
      CU_EVENT_WAIT_EXTERNAL,
      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
      CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    };
    for (const [name, value] of Object.entries(values)) {
      expect(enumValue(source, name), name).toBe(value);
    }
    CU_GRAPH_EXEC_UPDATE_RESULT_NAMES.forEach((name, value) => {
      expect(enumValue(source, name), name).toBe(value);
    });
  });
});
