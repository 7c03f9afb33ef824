/* nn.h - the interface of src/nn: datasets (IDX files, MNIST), optimizers
 * (SGD, Adam, AdamW), layers (Linear, Conv2d, BatchNorm2d, LayerNorm,
 * Embedding) and saving and loading tensors in the safetensors format.
 *
 * Files: idx.c (IDX reader, MNIST directory loader), optim.c (optimizers),
 * layers.c (layers and their default initialisation), safetensors.c (the
 * file format), gz.c (reading plain or gzip files; zlib is dlopen'ed).
 * src/nn sits on top of the public API: it builds graphs only through
 * tinyc.h calls, so every error names a public call. */
#ifndef TC_NN_H
#define TC_NN_H

#include "tensor/tensor.h"

/* ---- reading files that may be gzip-compressed (gz.c) ---------------------
 * A gzip file (it starts with 1f 8b) is read through zlib, which is loaded
 * with dlopen on first use, so the library does not link it; any other file
 * is read as it is. */
typedef struct tc_gzfile tc_gzfile;
/* opens path for reading; NULL with TC_ERR_IO naming `api` and the path */
tc_gzfile *tc_gz_open(const char *path, const char *api);
/* reads up to n bytes into dst; returns the bytes read (fewer only at the end
 * of the data), or -1 with TC_ERR_IO (a corrupt gzip stream, a read error) */
int64_t tc_gz_read(tc_gzfile *f, void *dst, int64_t n);
bool tc_gz_is_compressed(const tc_gzfile *f);
void tc_gz_close(tc_gzfile *f); /* NULL is fine */

/* ---- safetensors (safetensors.c) ------------------------------------------
 * tc_safe_save's work, with `api` naming the public call */
TC_MUST_USE tc_status tc_safe_save_as(const char *api, const char *path, const char *const *names,
                          tc_tensor **ts, int n);
/* tc_safe_load's work, with `api` naming the public call; strict: an entry
 * of the file that is not in names is an error too */
TC_MUST_USE tc_status tc_safe_load_into(const char *api, const char *path, const char *const *names,
                            tc_tensor **ts, int n, bool strict);

#endif /* TC_NN_H */
