/* Backend registry: the built-ins, plus plugins loaded with dlopen from a path, or found by name
 * in the plugin folders (plugins.c), that comes only from the node's own command line,
 * configuration file or environment (never from a network peer). */
#include "backend.h"
#include "plugins.h"

#include "slide.h"

#include "cmn/err.h"

#include "cmn/log.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#ifdef SUT_HAVE_ONNX
#    include "onnx_backend.h"
#endif

typedef struct {
    const char *name;
    const sut_backend_ops_t *(*ops)(void);
} builtin_t;

static const builtin_t builtins[] = {
    {"null", sut_backend_null_ops}, {"digest", sut_backend_digest_ops},
    {"sim", sut_backend_sim_ops},   {"unet-sim", sut_backend_unet_sim_ops},
#ifdef SUT_HAVE_ONNX
    {"onnx", sut_backend_onnx_ops},
#endif
};

const char *sut__backend_list(void)
{
#ifdef SUT_HAVE_ONNX
    return "null, digest, sim, unet-sim, onnx";
#else
    return "null, digest, sim, unet-sim (onnx: not built: oneDNN or the ONNX schema was missing)";
#endif
}

static void backend_log(int level, const char *msg)
{
    if (level < SUT_LOG_ERROR)
        level = SUT_LOG_ERROR;
    if (level > SUT_LOG_DEBUG)
        level = SUT_LOG_DEBUG;
    cmn_log((cmn_log_level_t)level, "backend: %s", msg);
}

static int resolve(sut_be_t *n, const char *b, const sut_backend_ops_t **ops, cmn_errbuf_t *eb)
{
    sut_backend_entry_fn entry;
    char *found = NULL, why[400];
    size_t i;
    int rc;

    if (!strchr(b, '/')) {
        for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
            if (strcmp(builtins[i].name, b) == 0) {
                *ops = builtins[i].ops();
                return 0;
            }
        }
        if ((rc = sut__plugin_find(b, &found, why, sizeof(why))) < 0)
            return cmn_errf(eb, rc, "unknown backend '%s': not built in (%s) and %s", b,
                            sut__backend_list(), why);
        cmn_log_info("backend %s: plugin %s", b, found);
    }
    n->dl = dlopen(found ? found : b, RTLD_NOW | RTLD_LOCAL);
    free(found);
    if (!n->dl)
        return cmn_errf(eb, CMN_ECONFIG, "cannot load backend plugin %s: %s", b, dlerror());
    *(void **)&entry = dlsym(n->dl, SUT_BACKEND_ENTRY_SYMBOL);
    if (!entry)
        return cmn_errf(eb, CMN_ECONFIG, "backend plugin %s has no %s() entry point", b,
                        SUT_BACKEND_ENTRY_SYMBOL);
    *ops = entry();
    if (!*ops)
        return cmn_errf(eb, CMN_ECONFIG, "backend plugin %s: %s() returned NULL", b,
                        SUT_BACKEND_ENTRY_SYMBOL);
    return 0;
}

int sut__backend_load(sut_be_t *n, const sut_opts_t *o, cmn_errbuf_t *eb)
{
    const sut_backend_ops_t *ops = NULL;
    sut_backend_config_t cfg;
    char err[512] = "";
    int rc;

    rc = resolve(n, o->backend, &ops, eb);
    if (rc < 0)
        return rc;
    if (ops->abi_version != SUT_BACKEND_ABI_VERSION)
        return cmn_errf(eb, CMN_EVERSION,
                        "backend %s speaks ABI version %u; this sut-node speaks %u", o->backend,
                        ops->abi_version, SUT_BACKEND_ABI_VERSION);
    if (ops->struct_size < offsetof(sut_backend_ops_t, alloc_input) || !ops->create ||
        !ops->destroy || !ops->describe || !ops->infer)
        return cmn_errf(eb, CMN_EVERSION, "backend %s: incomplete function table", o->backend);
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = o->device;
    cfg.max_batch = o->max_batch;
    cfg.threads = o->threads;
    cfg.seed = o->seed;
    cfg.n_options = o->n_opts;
    cfg.keys = o->opt_keys;
    cfg.values = o->opt_values;
    cfg.log = backend_log;
    rc = ops->create(&cfg, &n->be, err, sizeof(err));
    if (rc < 0)
        return cmn_errf(eb, rc < 0 ? rc : CMN_EBACKEND, "backend %s: %s", o->backend,
                        err[0] ? err : cmn_strerror(rc));
    n->ops = ops;
    /* ABI 1.1 appended cancel: a 1.0 table is shorter and never has it. */
    if (ops->struct_size >= offsetof(sut_backend_ops_t, cancel) + sizeof(ops->cancel))
        n->cancel = ops->cancel;
    /* ABI 1.2 appended ready (and with it a failed sample's message). */
    if (ops->struct_size >= offsetof(sut_backend_ops_t, ready) + sizeof(ops->ready)) {
        n->ready = ops->ready;
        n->fail_text = 1;
    }
    /* ABI 1.3 appended attach and detach (the node's loop for an inline backend's I/O). */
    if (ops->struct_size >= offsetof(sut_backend_ops_t, detach) + sizeof(ops->detach) &&
        ops->attach && ops->detach) {
        n->attach = ops->attach;
        n->detach = ops->detach;
    }
    memset(&n->info, 0, sizeof(n->info));
    rc = ops->describe(n->be, &n->info);
    if (rc < 0)
        return cmn_errf(eb, rc, "backend %s: describe failed: %s", o->backend, cmn_strerror(rc));
    if (!n->info.name)
        n->info.name = ops->name ? ops->name : "plugin";
    if (!n->info.device)
        n->info.device = o->device;
    if (!(n->info.weight > 0))
        n->info.weight = 1.0;
    if (o->window)
        return sut__slide_wrap(n, o->window, o->window_batch, eb);
    return 0;
}

void sut__backend_unload(sut_be_t *n)
{
    if (n->ops && n->be)
        n->ops->destroy(n->be);
    n->be = NULL;
    n->ops = NULL;
    n->cancel = NULL;
    n->ready = NULL;
    n->fail_text = 0;
    n->attach = NULL;
    n->detach = NULL;
    n->attached = 0;
    if (n->dl)
        dlclose(n->dl);
    n->dl = NULL;
}
