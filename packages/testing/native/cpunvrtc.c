/*
 * A libnvrtc for tests that compiles CUDA C for the CPU: the program's source, after
 * cuda-on-cpu.h and with the inline PTX our kernels use replaced by C++ (a table below; any
 * other `asm` fails the compile with a message), goes to the host's C++ compiler ($CXX, else
 * c++) as a shared library, with a `ct_cpu_launch_<name>` function beside each
 * `extern "C" __global__` kernel. The "cubin" (and "PTX") is the text
 * "cpu-cuda module\n", the library's size (8 bytes) and the library itself, which cpucuda.c's
 * cuModuleLoadData loads from memory. Each program builds in a folder of its own made by
 * mkdtemp (mode 0700) under $TMPDIR, removed with the program.
 *
 * CPU_CUDA_HEADER is cuda-on-cpu.h's path, given at build time (cpu-cuda.ts). A test double,
 * loaded only through CUDA_TASKS_LIBNVRTC by tests; no package uses it.
 */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CPU_CUDA_HEADER
#error "build with -DCPU_CUDA_HEADER=\"/path/to/cuda-on-cpu.h\""
#endif

enum { SUCCESS = 0, OUT_OF_MEMORY = 1, INVALID_INPUT = 3, INVALID_PROGRAM = 4, COMPILATION = 6 };

typedef struct {
  char *source;
  char folder[256];
  char *log;
  char *image;
  size_t image_size;
} program;

/* What an image starts with; then the library's size (8 bytes, host order) and its bytes. */
static const char IMAGE_PREFIX[] = "cpu-cuda module\n";

/* Text that grows: a malloc'd buffer and its length. */
typedef struct {
  char *text;
  size_t length, capacity;
} buffer;

static int append(buffer *b, const char *text, size_t length) {
  if (b->length + length + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->length + length + 1) capacity *= 2;
    char *grown = realloc(b->text, capacity);
    if (grown == NULL) return OUT_OF_MEMORY;
    b->text = grown;
    b->capacity = capacity;
  }
  memcpy(b->text + b->length, text, length);
  b->length += length;
  b->text[b->length] = 0;
  return SUCCESS;
}

static int append_string(buffer *b, const char *text) { return append(b, text, strlen(text)); }

/* The inline PTX that the generated kernels use, and its C++. */
static const char *const REPLACEMENTS[][2] = {
    {"asm volatile(\"shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=r\"(ct_result) : "
     "\"r\"(ct_word), \"r\"(ct_delta));",
     "ct_result = ct_cpu::shfl_down(ct_word, ct_delta);"},
    {"asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(ct_f) : \"h\"(ct_h));",
     "ct_f = ct_cpu::f16_to_f32(ct_h);"},
    {"asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(ct_h) : \"f\"(ct_f));",
     "ct_h = ct_cpu::f32_to_f16(ct_f);"},
};

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The source with the replacements made; NULL (and `why`) for inline PTX not in the table. */
static char *rewrite(const char *source, char *why, size_t why_size) {
  buffer out = {0};
  const char *p = source;
  while (*p) {
    int replaced = 0;
    for (size_t i = 0; i < sizeof REPLACEMENTS / sizeof REPLACEMENTS[0]; i++) {
      size_t length = strlen(REPLACEMENTS[i][0]);
      if (strncmp(p, REPLACEMENTS[i][0], length) == 0) {
        if (append_string(&out, REPLACEMENTS[i][1]) != SUCCESS) goto fail;
        p += length;
        replaced = 1;
        break;
      }
    }
    if (replaced) continue;
    if (strncmp(p, "asm", 3) == 0 && (p == source || !is_name_char(p[-1])) && !is_name_char(p[3])) {
      snprintf(why, why_size, "cpu-cuda: inline PTX that is not emulated: %.120s", p);
      goto fail;
    }
    if (append(&out, p, 1) != SUCCESS) goto fail;
    p++;
  }
  return out.text ? out.text : strdup("");
fail:
  free(out.text);
  return NULL;
}

/* Appends a launcher for each `extern "C" __global__ ... void name(` of `source`. */
static int add_launchers(buffer *out, const char *source) {
  const char *marker = "extern \"C\" __global__";
  for (const char *p = strstr(source, marker); p != NULL; p = strstr(p + 1, marker)) {
    const char *v = strstr(p, " void ");
    const char *paren = strchr(p, '(');
    /* __launch_bounds__(...) may come before `void`. */
    while (paren != NULL && v != NULL && paren < v) paren = strchr(paren + 1, '(');
    if (v == NULL || paren == NULL) continue;
    const char *name = v + strlen(" void ");
    while (*name == ' ') name++;
    size_t length = 0;
    while (is_name_char(name[length])) length++;
    if (length == 0 || length > 200) continue;
    char line[1024];
    snprintf(line, sizeof line,
             "\nextern \"C\" int ct_cpu_launch_%.*s(unsigned gx, unsigned gy, unsigned gz, "
             "unsigned bx, unsigned by, unsigned bz, void **parameters) {\n"
             "  return ct_cpu::launch(%.*s, dim3(gx, gy, gz), dim3(bx, by, bz), parameters) ? 0 : 1;\n"
             "}\n",
             (int)length, name, (int)length, name);
    if (append_string(out, line) != SUCCESS) return OUT_OF_MEMORY;
  }
  return SUCCESS;
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return INVALID_INPUT;
  size_t length = strlen(text);
  while (length > 0) {
    ssize_t n = write(fd, text, length);
    if (n <= 0) {
      close(fd);
      return INVALID_INPUT;
    }
    text += n;
    length -= (size_t)n;
  }
  close(fd);
  return SUCCESS;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  buffer b = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.length < (1 << 20)) append(&b, chunk, n);
  fclose(f);
  return b.text ? b.text : strdup("");
}

static int remove_entry(const char *path, const struct stat *info, int type, struct FTW *walk) {
  return remove(path);
}

/* Removes `folder` and what it holds. */
static void remove_folder(const char *folder) { nftw(folder, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

int nvrtcVersion(int *major, int *minor) {
  *major = 13;
  *minor = 0;
  return SUCCESS;
}

const char *nvrtcGetErrorString(int result) {
  switch (result) {
    case SUCCESS: return "NVRTC_SUCCESS";
    case OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR (cpu-cuda)";
  }
}

int nvrtcCreateProgram(program **out, const char *source, const char *name, int headers,
                       const char *const *header_sources, const char *const *header_names) {
  if (source == NULL) return INVALID_INPUT;
  program *p = calloc(1, sizeof *p);
  if (p == NULL) return OUT_OF_MEMORY;
  const char *tmp = getenv("TMPDIR");
  snprintf(p->folder, sizeof p->folder, "%s/cpu-cuda-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(p->folder) == NULL) {
    free(p);
    return INVALID_INPUT;
  }
  p->source = strdup(source);
  int result = p->source == NULL ? OUT_OF_MEMORY : SUCCESS;
  for (int i = 0; result == SUCCESS && i < headers; i++) {
    /* A header is a plain name in the program's folder: no path of its own. */
    const char *header = header_names[i];
    if (header == NULL || header_sources[i] == NULL || strchr(header, '/') != NULL ||
        header[0] == '.' || header[0] == 0) {
      result = INVALID_INPUT;
      break;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", p->folder, header);
    result = write_file(path, header_sources[i]);
  }
  if (result != SUCCESS) {
    remove_folder(p->folder);
    free(p->source);
    free(p);
    return result;
  }
  *out = p;
  return SUCCESS;
}

int nvrtcCompileProgram(program *p, int count, const char *const *options) {
  if (p == NULL) return INVALID_PROGRAM;
  char why[256] = {0};
  char *source = rewrite(p->source, why, sizeof why);
  if (source == NULL) {
    free(p->log);
    p->log = strdup(why);
    return COMPILATION;
  }
  buffer text = {0};
  append_string(&text, "#include \"" CPU_CUDA_HEADER "\"\n#line 1\n");
  append_string(&text, source);
  add_launchers(&text, source);
  free(source);
  char file[512], library[512], log[512];
  snprintf(file, sizeof file, "%s/program.cc", p->folder);
  snprintf(library, sizeof library, "%s/module.so", p->folder);
  snprintf(log, sizeof log, "%s/log.txt", p->folder);
  unlink(file);
  unlink(log);
  int written = write_file(file, text.text);
  free(text.text);
  if (written != SUCCESS) return INVALID_INPUT;

  const char *compiler = getenv("CXX");
  if (compiler == NULL || *compiler == 0) compiler = "c++";
  const char *argv[64];
  int argc = 0;
  char include[600];
  snprintf(include, sizeof include, "-I%s", p->folder);
  argv[argc++] = compiler;
  argv[argc++] = "-std=c++17";
  argv[argc++] = "-O1";
  argv[argc++] = "-fPIC";
  argv[argc++] = "-shared";
  argv[argc++] = "-ffp-contract=off";
  argv[argc++] = "-w";
  argv[argc++] = include;
  for (int i = 0; i < count && argc < 56; i++) {
    /* Macros and include folders carry over; architecture and the like mean nothing here. */
    if (strncmp(options[i], "-D", 2) == 0 || strncmp(options[i], "-I", 2) == 0) argv[argc++] = options[i];
  }
  argv[argc++] = "-o";
  argv[argc++] = library;
  argv[argc++] = file;
  argv[argc] = NULL;
  pid_t pid = fork();
  if (pid < 0) return INVALID_INPUT;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(compiler, (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  free(p->log);
  p->log = read_file(log);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return COMPILATION;
  FILE *built = fopen(library, "rb");
  if (built == NULL) return COMPILATION;
  fseek(built, 0, SEEK_END);
  long bytes = ftell(built);
  fseek(built, 0, SEEK_SET);
  free(p->image);
  p->image = NULL;
  p->image_size = 0;
  if (bytes <= 0) {
    fclose(built);
    return COMPILATION;
  }
  size_t size = sizeof IMAGE_PREFIX - 1 + 8 + (size_t)bytes;
  p->image = malloc(size);
  if (p->image == NULL) {
    fclose(built);
    return OUT_OF_MEMORY;
  }
  p->image_size = size;
  memcpy(p->image, IMAGE_PREFIX, sizeof IMAGE_PREFIX - 1);
  unsigned long long length = (unsigned long long)bytes;
  memcpy(p->image + sizeof IMAGE_PREFIX - 1, &length, 8);
  size_t read = fread(p->image + sizeof IMAGE_PREFIX - 1 + 8, 1, (size_t)bytes, built);
  fclose(built);
  unlink(library);
  return read == (size_t)bytes ? SUCCESS : COMPILATION;
}

static int image_size(program *p, size_t *size) {
  if (p == NULL || p->image == NULL) return INVALID_PROGRAM;
  *size = p->image_size;
  return SUCCESS;
}
static int image_copy(program *p, char *out) {
  if (p == NULL || p->image == NULL) return INVALID_PROGRAM;
  memcpy(out, p->image, p->image_size);
  return SUCCESS;
}

int nvrtcGetCUBINSize(program *p, size_t *size) { return image_size(p, size); }
int nvrtcGetCUBIN(program *p, char *out) { return image_copy(p, out); }
int nvrtcGetPTXSize(program *p, size_t *size) { return image_size(p, size); }
int nvrtcGetPTX(program *p, char *out) { return image_copy(p, out); }

int nvrtcGetProgramLogSize(program *p, size_t *size) {
  if (p == NULL) return INVALID_PROGRAM;
  *size = (p->log ? strlen(p->log) : 0) + 1;
  return SUCCESS;
}
int nvrtcGetProgramLog(program *p, char *out) {
  if (p == NULL) return INVALID_PROGRAM;
  const char *log = p->log ? p->log : "";
  memcpy(out, log, strlen(log) + 1);
  return SUCCESS;
}

int nvrtcDestroyProgram(program **p) {
  if (p == NULL || *p == NULL) return INVALID_PROGRAM;
  remove_folder((*p)->folder);
  free((*p)->source);
  free((*p)->log);
  free((*p)->image);
  free(*p);
  *p = NULL;
  return SUCCESS;
}
