/* The backend registry (backend.c) and the built-in backends (builtin.c). */
#ifndef SUT_BACKEND_REGISTRY_H
#define SUT_BACKEND_REGISTRY_H

#include "cmn/err.h"
#include "types.h"

/* Resolves o->backend (a built-in name or a plugin path), creates and describes it. On failure
 * |b| may hold a partly loaded backend: sut__backend_unload() it. Returns 0 or a negative code
 * with a reason in |eb|. */
int sut__backend_load(sut_be_t *b, const sut_opts_t *o, cmn_errbuf_t *eb);
void sut__backend_unload(sut_be_t *b);
const char *sut__backend_list(void);

const sut_backend_ops_t *sut_backend_null_ops(void);
const sut_backend_ops_t *sut_backend_digest_ops(void);
const sut_backend_ops_t *sut_backend_sim_ops(void);
const sut_backend_ops_t *sut_backend_unet_sim_ops(void);

#endif
