/* driver.c runs the flite C layer (cflite.c, crand.c) from several threads
 * at once, as the Go engines do, so that valgrind's helgrind and drd can
 * watch the C side alone: every job (the talker, the vocoder whole and
 * streamed, the diphone path, text analysis and one-call synthesis, for
 * every voice) runs once alone, then from every thread in an order of its
 * own, and each result's hash must be the lone run's.
 *
 * Usage: driver THREADS. It prints one line per mismatch and exits 1 if
 * there was any. TestCDriver builds and runs it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cflite.h"
#include "_cgo_export.h"

static const char *texts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Dr. Smith paid $5 on 3/4, didn't he?",
};
#define NTEXTS 2
#define NKINDS 4 /* talker+vocoder whole, vocoder streamed, analysis, synth */
#define NJOBS (OMNI_NVOICES * NTEXTS * NKINDS)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

#define FNV0 14695981039346656037ULL

int omniStreamBlock(uintptr_t h, short *samples, int n, int rate)
{
    uint64_t *acc = (uint64_t *)h;
    *acc = fnv(*acc, samples, (size_t)n * sizeof(*samples));
    *acc = fnv(*acc, &rate, sizeof(rate));
    return CST_AUDIO_STREAM_CONT;
}

static uint64_t wave_hash(uint64_t h, const cst_wave *w)
{
    return fnv(h, w->samples, (size_t)w->num_samples * sizeof(short));
}

/* talk_vocode runs the talker on text, hashes its output, vocodes it
 * (whole, or streamed) and hashes the audio. */
static uint64_t talk_vocode(int v, const char *text, int streamed)
{
    omni_talk t;
    cst_wave *w = NULL;
    uint64_t h = FNV0, acc = FNV0;
    int rc;
    if (omni_voice_is_cg(v))
    {
        float *params, *str;
        if (omni_talk_cg(v, text, 0, &t) != OMNI_OK)
            return 0;
        params = calloc((size_t)t.nframes * t.nch, sizeof(float));
        str = calloc((size_t)t.nframes * (t.nstr + 1), sizeof(float));
        omni_talk_frames(&t, params, str);
        h = fnv(h, params, (size_t)t.nframes * t.nch * sizeof(float));
        rc = omni_vocode_cg(v, params, t.nframes, t.nch, str, t.nstr,
                            omni_voice_frame_shift(v), 1, 1599,
                            streamed ? (uintptr_t)&acc : 0, &w);
        free(params);
        free(str);
    }
    else
    {
        char *names;
        float *ends, *pos, *f0;
        unsigned char *cluster;
        if (omni_talk_diphone(v, text, 0, &t) != OMNI_OK)
            return 0;
        names = malloc(t.namebytes);
        ends = calloc(t.nseg, sizeof(float));
        cluster = calloc(t.nseg, 1);
        pos = calloc(t.ntgt, sizeof(float));
        f0 = calloc(t.ntgt, sizeof(float));
        omni_talk_segments(&t, names, ends, cluster, pos, f0);
        h = fnv(h, ends, t.nseg * sizeof(float));
        h = fnv(h, f0, t.ntgt * sizeof(float));
        rc = omni_vocode_diphone(v, names, ends, cluster, t.nseg, pos, f0,
                                 t.ntgt, 1, &w);
        free(names);
        free(ends);
        free(cluster);
        free(pos);
        free(f0);
    }
    omni_talk_free(&t);
    if (rc != OMNI_OK)
        return 0;
    if (w != NULL)
    {
        h = wave_hash(h, w);
        delete_wave(w);
    }
    return fnv(h, &acc, sizeof(acc));
}

/* analyze hashes the words, times and phones of text (no wave). */
static uint64_t analyze(int v, const char *text, int wave)
{
    cst_utterance *u;
    int nw, np, i;
    const char **names, **phones, **tokens;
    float *start, *end;
    int *nph, *tokid;
    uint64_t h = FNV0;
    if (omni_synth_text(v, text, 3, !wave, &u) != OMNI_OK)
        return 0;
    omni_utt_counts(u, &nw, &np);
    names = calloc(nw, sizeof(*names));
    tokens = calloc(nw, sizeof(*tokens));
    phones = calloc(np + 1, sizeof(*phones));
    start = calloc(nw, sizeof(float));
    end = calloc(nw, sizeof(float));
    nph = calloc(nw, sizeof(int));
    tokid = calloc(nw, sizeof(int));
    omni_utt_words(u, names, start, end, nph, phones, tokens, tokid);
    for (i = 0; i < nw; i++)
        h = fnv(h, names[i], strlen(names[i]));
    for (i = 0; i < np; i++)
        h = fnv(h, phones[i], strlen(phones[i]));
    h = fnv(h, start, nw * sizeof(float));
    h = fnv(h, end, nw * sizeof(float));
    if (wave && omni_utt_wave(u) != NULL)
        h = wave_hash(h, omni_utt_wave(u));
    free(names);
    free(tokens);
    free(phones);
    free(start);
    free(end);
    free(nph);
    free(tokid);
    delete_utterance(u);
    return h;
}

static uint64_t job(int j)
{
    int kind = j % NKINDS, t = (j / NKINDS) % NTEXTS, v = j / (NKINDS * NTEXTS);
    switch (kind)
    {
    case 0:
        return talk_vocode(v, texts[t], 0);
    case 1:
        return talk_vocode(v, texts[t], 1);
    case 2:
        return analyze(v, texts[t], 0);
    default:
        return analyze(v, texts[t], 1);
    }
}

static uint64_t want[NJOBS];
static int mismatches; /* under mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg, i, j;
    for (i = 0; i < NJOBS; i++)
    {
        j = (i * 7 + id * 5) % NJOBS; /* 7 is prime to NJOBS: a permutation */
        if (job(j) != want[j])
        {
            pthread_mutex_lock(&mu);
            mismatches++;
            printf("thread %d: job %d differs from its lone run\n", id, j);
            pthread_mutex_unlock(&mu);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2, i;
    pthread_t th[64];
    if (n < 1 || n > 64 || omni_init() != OMNI_OK)
        return 2;
    for (i = 0; i < NJOBS; i++)
        if ((want[i] = job(i)) == 0)
        {
            printf("job %d failed alone\n", i);
            return 2;
        }
    for (i = 0; i < n; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    printf("%d threads, %d jobs each, %d mismatches\n", n, NJOBS, mismatches);
    return mismatches ? 1 : 0;
}
