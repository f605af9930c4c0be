// SPDX-License-Identifier: GPL-2.0
/*
 * dl.c - shared libraries loaded on first use (see dl.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dl.h"

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

/* Open lib and fill its table; 0 or lib->err with lib->why set. */
static int dl_open(struct bch_dl_lib *lib)
{
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		goto err;
	for (size_t i = 0; i < lib->nr_syms; i++) {
		const struct bch_dl_sym *s = &lib->syms[i];
		void *p = s->version ? dlvsym(h, s->name, s->version) : dlsym(h, s->name);

		if (!p)
			goto err;
		/* POSIX: a function's address round-trips through void * */
		memcpy((char *)lib->table + s->offset, &p, sizeof(p));
	}
	return 0;
err:;
	/* dlerror() describes the failed dlopen or dlsym until the next dl call */
	const char *why = dlerror();

	snprintf(lib->why, sizeof(lib->why), "%s", why ? why : "symbol resolves to NULL");
	if (h) {
		for (size_t i = 0; i < lib->nr_syms; i++)	/* invariant (1) */
			memset((char *)lib->table + lib->syms[i].offset, 0, sizeof(void *));
		dlclose(h);
	}
	return lib->err;
}

int bch_dl_load(struct bch_dl_lib *lib)
{
	if (!atomic_load_explicit(&lib->tried, memory_order_acquire)) {
		pthread_mutex_lock(&dl_lock);
		if (!atomic_load_explicit(&lib->tried, memory_order_relaxed)) {
			lib->ret = dl_open(lib);
			atomic_store_explicit(&lib->tried, true, memory_order_release);
		}
		pthread_mutex_unlock(&dl_lock);
	}
	return lib->ret;
}
