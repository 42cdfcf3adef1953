/* test_pool.c: the in-memory pool's platform key check (pool_auth), which
 * remembers the keys presented before instead of hashing them again: a
 * remembered key still proves nothing once it is revoked, and a key that
 * differs from a remembered one in any byte or in length is refused. */
#include "check.h"
#include "route/pool.h"
#include "store/store.h"

static char test_dir[64];

static store *test_store(const char *name)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "%s/%s.db", test_dir, name);
    store *s = store_open(path, err, sizeof err);
    if (!s)
        fprintf(stderr, "  store_open(%s): %s\n", path, err);
    return s;
}

static void test_pool_auth_remembered_key_is_refused_after_revocation(void)
{
    store *s = test_store("revoke");
    char ka[64], kb[64], err[256];
    int64_t ida = 0, idb = 0;
    CHECK_EQ_INT(store_key_add(s, "a", ka, sizeof ka, &ida, NULL, 0), 0);
    CHECK_EQ_INT(store_key_add(s, "b", kb, sizeof kb, &idb, NULL, 0), 0);
    pool *p = pool_new(s);
    for (int round = 0; round < 3; round++) { /* first hashed, then remembered */
        pool_key *a = pool_auth(p, ka), *b = pool_auth(p, kb);
        CHECK(a && a->k.id == ida);
        CHECK(b && b->k.id == idb);
    }
    CHECK_EQ_INT(store_key_revoke_id(s, ida, err, sizeof err), 1); /* keys revoked */
    CHECK_EQ_INT(pool_refresh(p), 1);
    CHECK(pool_auth(p, ka) == NULL);
    pool_key *b = pool_auth(p, kb);
    CHECK(b && b->k.id == idb);
    pool_free(p);
    store_close(s);
}

static void test_pool_auth_refuses_keys_near_a_remembered_one(void)
{
    store *s = test_store("near");
    char k[64];
    int64_t id = 0;
    CHECK_EQ_INT(store_key_add(s, "k", k, sizeof k, &id, NULL, 0), 0);
    pool *p = pool_new(s);
    pool_key *ok = pool_auth(p, k);
    CHECK(ok && ok->k.id == id);
    size_t n = strlen(k);
    char near[80];
    memcpy(near, k, n + 1);
    near[n - 1] = near[n - 1] == 'x' ? 'y' : 'x'; /* last byte differs */
    CHECK(pool_auth(p, near) == NULL);
    near[n - 1] = k[n - 1];
    near[n] = 'x', near[n + 1] = '\0'; /* one byte longer */
    CHECK(pool_auth(p, near) == NULL);
    near[n - 1] = '\0'; /* one byte shorter */
    CHECK(pool_auth(p, near) == NULL);
    CHECK(pool_auth(p, "") == NULL);
    ok = pool_auth(p, k);
    CHECK(ok && ok->k.id == id);
    pool_free(p);
    store_close(s);
}

static void test_pool_auth_serves_more_keys_than_it_remembers(void)
{
    store *s = test_store("many");
    enum { N = 40 }; /* more than the pool remembers */
    char keys[N][64];
    int64_t ids[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "k%d", i);
        CHECK_EQ_INT(store_key_add(s, name, keys[i], sizeof keys[i], &ids[i], NULL, 0), 0);
    }
    pool *p = pool_new(s);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < N; i++) {
            pool_key *k = pool_auth(p, keys[(i * 7 + round) % N]);
            CHECK(k && k->k.id == ids[(i * 7 + round) % N]);
        }
    pool_free(p);
    store_close(s);
}

/* What an account serves: the operator's list wins over the learned one,
 * an unknown list serves everything, a refused model is out until a reset,
 * and the refused list stays bounded (the oldest is forgotten). */
static void test_pool_account_serves_by_override_learned_list_and_refusals(void)
{
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    CHECK_EQ_INT(pool_account_serves(&pa, "anything"), 1);
    pa.models_upstream = strdup("m-a,m-b");
    CHECK_EQ_INT(pool_account_serves(&pa, "m-b"), 1);
    CHECK_EQ_INT(pool_account_serves(&pa, "m-c"), 0);
    pa.a.models = strdup("m-c");
    CHECK_EQ_INT(pool_account_serves(&pa, "m-c"), 1);
    CHECK_EQ_INT(pool_account_serves(&pa, "m-a"), 0);
    pool_account_refuse_model(&pa, "m-c");
    CHECK_EQ_INT(pool_account_serves(&pa, "m-c"), 0);
    CHECK_EQ_INT(pool_account_serves(&pa, ""), 1); /* no model named: nothing to check */
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "x-%d", i);
        pool_account_refuse_model(&pa, name);
    }
    CHECK_EQ_INT(pool_account_serves(&pa, "m-c"), 1); /* forgotten: the list is bounded */
    size_t commas = 0;
    for (const char *c = pa.models_refused; *c; c++)
        commas += *c == ',';
    CHECK(commas < 64);
    CHECK(strstr(pa.models_refused, "x-199") != NULL);
    pool_account_refuse_model(&pa, "a,b"); /* not a model name: ignored */
    CHECK(strstr(pa.models_refused, "a,b") == NULL);
    pool_account_reset(&pa);
    CHECK(pa.models_refused == NULL);
    free(pa.a.models);
    free(pa.models_upstream);
}

/* Family slots: a family rests for its own models (by family, or by the
 * model whose 429 cooled it), not for others; the slots are bounded (the
 * cooldown that ended first gives way) and a reset clears them. */
static void test_pool_family_slots_cool_one_family_and_stay_bounded(void)
{
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    CHECK(pool_family_cooling(&pa, "m-fast", "codex_fast", 100) == NULL);
    account_family *f = pool_family_slot(&pa, "codex_fast");
    CHECK_EQ_STR(f->family, "codex_fast");
    CHECK(f->primary_used_pct == -1);
    snprintf(f->model, sizeof f->model, "m-fast");
    f->until = 200;
    CHECK(pool_family_cooling(&pa, "m-fast", "", 100) == f);       /* by its model */
    CHECK(pool_family_cooling(&pa, "m-other", "codex_fast", 100) == f); /* by the family */
    CHECK(pool_family_cooling(&pa, "m-other", "", 100) == NULL);
    CHECK(pool_family_cooling(&pa, "m-other", "codex_else", 100) == NULL);
    CHECK(pool_family_cooling(&pa, "m-fast", "codex_fast", 200) == NULL); /* over */
    CHECK(pool_family_slot(&pa, "codex_fast") == f);
    char name[32];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "codex_f%d", i);
        account_family *g = pool_family_slot(&pa, name);
        g->until = 300 + i;
    }
    int used = 0;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++)
        used += pa.st.fam[i].family[0] != '\0';
    CHECK_EQ_INT(used, ACCOUNT_FAMILIES);
    CHECK(pool_family_cooling(&pa, "x", "codex_f5", 250) != NULL); /* the newest stays */
    CHECK(pool_family_cooling(&pa, "m-fast", "codex_fast", 150) == NULL); /* the first ended first: gone */
    pool_account_reset(&pa);
    CHECK(pool_family_cooling(&pa, "x", "codex_f5", 250) == NULL);
}

/* Routing checks the list against the name the account would be sent
 * (after its --model-map); a refusal stays keyed by the client's name. */
static void test_pool_account_serves_request_checks_the_mapped_name(void)
{
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    pa.a.model_map = strdup("{\"fast\":\"m-a\",\"slow\":\"m-z\"}");
    char to[64];
    CHECK_EQ_INT(pool_account_model_for(&pa, "fast", to, sizeof to), 1);
    CHECK_EQ_STR(to, "m-a");
    CHECK_EQ_INT(pool_account_model_for(&pa, "m-b", to, sizeof to), 0);
    CHECK_EQ_STR(to, "m-b");
    CHECK_EQ_INT(pool_account_serves_request(&pa, "slow"), 1); /* no list known: everything */
    pa.models_upstream = strdup("m-a,m-b,slow");
    /* the upstream's own list is a hint for the order, never a wall */
    CHECK_EQ_INT(pool_account_serves_request(&pa, "slow"), 1);
    CHECK_EQ_INT(pool_account_lists(&pa, "fast"), 1);
    CHECK_EQ_INT(pool_account_lists(&pa, "slow"), 0); /* sent as m-z, not listed */
    pa.a.models = strdup("m-a,m-b,slow"); /* the operator's --models is one */
    CHECK_EQ_INT(pool_account_serves_request(&pa, "fast"), 1);
    CHECK_EQ_INT(pool_account_serves_request(&pa, "slow"), 0); /* sent as m-z, not listed */
    CHECK_EQ_INT(pool_account_lists(&pa, "slow"), 1);         /* the operator's list decides alone */
    CHECK_EQ_INT(pool_account_serves_request(&pa, "m-b"), 1);
    CHECK_EQ_INT(pool_account_serves(&pa, "slow"), 1);         /* the catalog's question: the list's own name */
    pool_account_refuse_model(&pa, "fast");
    CHECK_EQ_INT(pool_account_serves_request(&pa, "fast"), 0);
    CHECK_EQ_INT(pool_account_serves_request(&pa, "m-a"), 1);
    free(pa.a.model_map);
    free(pa.a.models);
    free(pa.models_upstream);
    free(pa.models_refused);
}

/* An operator's reset is told to the rest hook once (the Redis
 * implementation turns it into a reset for the other gateways), even for
 * an account that was not resting, and a save after it tells nothing. */
static int rest_calls, rest_calls_reset;
static void count_rest(void *ud, pool_account *pa)
{
    (void)ud;
    rest_calls++;
    rest_calls_reset += pa->rest_reset;
}

static void test_pool_reset_is_told_to_the_rest_hook_once(void)
{
    store *s = test_store("reset");
    char err[256];
    account_new a = {.name = "a", .base_url = "http://127.0.0.1:9/v1", .token = "sk-a", .max_concurrency = -1};
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    pool *p = pool_new(s);
    pool_on_rest(p, count_rest, NULL);
    pool_account *pa = pool_at(p, 0);
    CHECK(pa != NULL);
    pool_state_save(p, pa); /* the first save takes the mark */
    rest_calls = rest_calls_reset = 0;
    pool_state_save(p, pa);
    CHECK_EQ_INT(rest_calls, 0); /* nothing moved */
    pool_account_reset(pa);      /* not resting: a reset still travels */
    pool_state_save(p, pa);
    CHECK_EQ_INT(rest_calls, 1);
    CHECK_EQ_INT(rest_calls_reset, 1);
    CHECK_EQ_INT(pa->rest_reset, 0);
    pool_state_save(p, pa);
    CHECK_EQ_INT(rest_calls, 1);
    pool_on_rest(p, NULL, NULL);
    pool_free(p);
    store_close(s);
}

int main(void)
{
    RUN(test_pool_family_slots_cool_one_family_and_stay_bounded);
    RUN(test_pool_account_serves_by_override_learned_list_and_refusals);
    RUN(test_pool_account_serves_request_checks_the_mapped_name);
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_pool") != 0)
        return 2;
    RUN(test_pool_auth_remembered_key_is_refused_after_revocation);
    RUN(test_pool_auth_refuses_keys_near_a_remembered_one);
    RUN(test_pool_auth_serves_more_keys_than_it_remembers);
    RUN(test_pool_reset_is_told_to_the_rest_hook_once);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
