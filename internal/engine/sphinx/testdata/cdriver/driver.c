/* driver.c runs the PocketSphinx C layer (csphinx.c) from several threads
 * at once, one decoder each, as the aligner's pool does, so that
 * valgrind's helgrind and drd can watch the C side alone: every job (a
 * transcript decoded whole; fed block by block with its probe and its
 * hypothesis read after every block; or that stopped after HEAD blocks,
 * as the aligner's head is) runs once alone, then ROUNDS times from every
 * thread in an order of its own, on whichever decoder of the shared pool
 * is free, and each result's hash must be the lone run's.
 *
 * Usage: driver HMM DICT LIST THREADS [ROUNDS]. Each line of LIST is a file of
 * 16 kHz 16-bit mono PCM and the dictionary keys of its words. It prints
 * one line per mismatch and exits 1 if there was any. TestCDriver builds
 * and runs it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csphinx.h"

#define MAXWORDS 256
#define MAXFILES 32
#define BLOCK 1600
#define HEAD 10

typedef struct {
    int16 *pcm;
    size_t n;
    char *words[MAXWORDS];
    int nwords;
} input;

static input inputs[MAXFILES];
static int ninputs;
static uint64_t want[3 * MAXFILES];
static const char *hmm, *dict;
static pthread_mutex_t create_mu = PTHREAD_MUTEX_INITIALIZER;
static int mismatches; /* under pool_mu */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_segs(uint64_t h, ps_decoder_t *ps)
{
    omni_segs s;
    int i, rc = omni_ps_segments(ps, &s);
    h = fnv(h, &rc, sizeof(rc));
    for (i = 0; i < s.n; i++)
    {
        h = fnv(h, s.words[i], strlen(s.words[i]));
        h = fnv(h, &s.sf[i], sizeof(int));
        h = fnv(h, &s.ef[i], sizeof(int));
    }
    omni_segs_free(&s);
    return h;
}

/* probe_for is the aligner's probeFor: the second word's first phone. */
static int probe_for(ps_decoder_t *ps, const char *word, char *key, size_t cap)
{
    char *pron = omni_ps_pron(ps, word), *sp;
    if (pron == NULL)
        return -1;
    if ((sp = strchr(pron, ' ')) != NULL)
        *sp = '\0';
    snprintf(key, cap, "omni/probe/%s", pron);
    if (!omni_ps_has_word(ps, key) && ps_add_word(ps, key, pron, 0) < 0)
    {
        free(pron);
        return -1;
    }
    free(pron);
    return 0;
}

static uint64_t job(ps_decoder_t *ps, const float *prior, int j)
{
    input *in = &inputs[j / 3];
    uint64_t h = 14695981039346656037ULL;
    char probe[64];
    size_t fed;
    if (j % 3 == 0)
    {
        if (omni_ps_set_words(ps, (const char *const *)in->words, in->nwords, NULL) != 0 ||
            omni_ps_decode(ps, in->pcm, in->n, 1) != 0)
            return 0;
        h = hash_segs(h, ps);
    }
    else
    {
        if (probe_for(ps, in->words[1], probe, sizeof(probe)) != 0 ||
            omni_ps_set_words(ps, (const char *const *)in->words, in->nwords, probe) != 0 ||
            omni_ps_stream_start(ps, prior) != 0)
            return 0;
        for (fed = 0; fed + BLOCK <= in->n && (j % 3 == 1 || fed < HEAD * BLOCK); fed += BLOCK)
        {
            if (omni_ps_stream_feed(ps, in->pcm + fed, BLOCK) != 0)
                return 0;
            h = hash_segs(h, ps);
        }
        if (j % 3 == 1 && omni_ps_stream_feed(ps, in->pcm + fed, in->n - fed) != 0)
            return 0;
        if (omni_ps_stream_end(ps) != 0)
            return 0;
        h = hash_segs(h, ps);
    }
    omni_ps_clear_words(ps);
    return h;
}

static ps_decoder_t *create(float **prior)
{
    ps_decoder_t *ps;
    pthread_mutex_lock(&create_mu); /* as the Go side's createMu */
    ps = omni_ps_new(hmm, dict);
    pthread_mutex_unlock(&create_mu);
    if (ps == NULL)
        return NULL;
    *prior = calloc(omni_ps_cmn_len(ps), sizeof(float));
    omni_ps_cmn_get(ps, *prior);
    return ps;
}

/* The pool of decoders the threads share, one job at a time each, as the
 * aligner's pool hands them out: a decoder decodes every input, in turn
 * on every thread. */
static ps_decoder_t *pool[64];
static float *priors[64];
static int npool;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static int rounds = 2;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg, round, i, j, n = 3 * ninputs;
    ps_decoder_t *ps;
    float *prior;
    uint64_t h;
    for (round = 0; round < rounds; round++)
        for (i = 0; i < n; i++)
        {
            j = (i * 5 + id + round) % n; /* a permutation when 5 is prime to n */
            pthread_mutex_lock(&pool_mu);
            while (npool == 0)
                pthread_cond_wait(&pool_cv, &pool_mu);
            npool--;
            ps = pool[npool];
            prior = priors[npool];
            pthread_mutex_unlock(&pool_mu);
            h = job(ps, prior, j);
            pthread_mutex_lock(&pool_mu);
            pool[npool] = ps;
            priors[npool] = prior;
            npool++;
            pthread_cond_signal(&pool_cv);
            if (h != want[j])
            {
                mismatches++;
                printf("thread %d round %d: job %d differs from its lone run\n", id, round, j);
            }
            pthread_mutex_unlock(&pool_mu);
        }
    return NULL;
}

static int read_list(const char *path)
{
    FILE *f = fopen(path, "r"), *pf;
    char line[8192], *tok;
    long size;
    if (f == NULL)
        return -1;
    while (ninputs < MAXFILES && fgets(line, sizeof(line), f))
    {
        input *in = &inputs[ninputs];
        if ((tok = strtok(line, " \n")) == NULL || (pf = fopen(tok, "rb")) == NULL)
            return -1;
        fseek(pf, 0, SEEK_END);
        size = ftell(pf);
        fseek(pf, 0, SEEK_SET);
        in->n = size / sizeof(int16);
        in->pcm = malloc(size);
        if (fread(in->pcm, sizeof(int16), in->n, pf) != in->n)
            return -1;
        fclose(pf);
        while ((tok = strtok(NULL, " \n")) != NULL && in->nwords < MAXWORDS)
            in->words[in->nwords++] = strdup(tok);
        if (in->nwords < 2)
            return -1;
        ninputs++;
    }
    fclose(f);
    return ninputs > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int n, i;
    pthread_t th[64];
    float *prior;
    ps_decoder_t *ps;
    if (argc < 5 || argc > 6 || (n = atoi(argv[4])) < 1 || n > 64)
        return 2;
    if (argc == 6 && (rounds = atoi(argv[5])) < 1)
        return 2;
    hmm = argv[1];
    dict = argv[2];
    if (read_list(argv[3]) != 0)
        return 2;
    omni_ps_quiet();
    if ((ps = create(&prior)) == NULL)
        return 2;
    for (i = 0; i < 3 * ninputs; i++)
        if ((want[i] = job(ps, prior, i)) == 0)
        {
            printf("job %d failed alone\n", i);
            return 2;
        }
    pool[npool] = ps;
    priors[npool++] = prior;
    for (i = 1; i < n; i++)
    {
        if ((pool[npool] = create(&priors[npool])) == NULL)
            return 2;
        npool++;
    }
    for (i = 0; i < n; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (i = 0; i < npool; i++)
    {
        ps_free(pool[i]);
        free(priors[i]);
    }
    printf("%d threads, %d rounds of %d jobs each, %d mismatches\n", n, rounds, 3 * ninputs, mismatches);
    return mismatches ? 1 : 0;
}
