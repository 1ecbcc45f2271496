/* csphinx.c: see csphinx.h. */
#include <stdlib.h>
#include <string.h>

#include <pocketsphinx.h>
#include <sphinxbase/cmn.h>
#include <sphinxbase/err.h>
#include <sphinxbase/feat.h>
#include <sphinxbase/fsg_model.h>

#include "csphinx.h"

#define OMNI_SEARCH "omni_align"

void omni_ps_quiet(void)
{
    err_set_logfp(NULL);
}

ps_decoder_t *omni_ps_new(const char *hmm, const char *dict)
{
    cmd_ln_t *config;
    ps_decoder_t *ps;

    /* -remove_silence no: the default drops frames it takes for silence
     * and shifts every later boundary 90 to 145 ms early.
     * -silprob 1: silence between words costs nothing; at the default
     * (0.005) pauses are absorbed into the words beside them.
     * -bestpath no: the segmentation comes straight from the grammar
     * search's backtrace, with no lattice to build; the result is the
     * same for a linear grammar. */
    config = cmd_ln_init(NULL, ps_args(), TRUE,
                         "-hmm", hmm,
                         "-dict", dict,
                         "-remove_silence", "no",
                         "-silprob", "1.0",
                         "-bestpath", "no",
                         NULL);
    if (config == NULL)
        return NULL;
    ps = ps_init(config);
    /* ps_init holds its own reference on success. */
    cmd_ln_free_r(config);
    return ps;
}

ps_decoder_t *omni_ps_new_lm(const char *hmm, const char *lm, const char *dict)
{
    cmd_ln_t *config;
    ps_decoder_t *ps;

    /* -remove_noise no: the noise estimate it subtracts is carried from
     * one utterance to the next, so the same audio was heard differently
     * after different audio (about one decode in two changed a word).
     * Otherwise the model's own defaults: this decoder is a generic
     * recognizer, not tuned to the speech it checks. */
    config = cmd_ln_init(NULL, ps_args(), TRUE,
                         "-hmm", hmm,
                         "-lm", lm,
                         "-dict", dict,
                         "-remove_noise", "no",
                         NULL);
    if (config == NULL)
        return NULL;
    ps = ps_init(config);
    cmd_ln_free_r(config);
    return ps;
}

char *omni_ps_hyp(ps_decoder_t *ps)
{
    /* The string belongs to the decoder and lives until its next
     * utterance. */
    const char *hyp = ps_get_hyp(ps, NULL);
    return strdup(hyp != NULL ? hyp : "");
}

int omni_ps_has_word(ps_decoder_t *ps, const char *word)
{
    char *p = ps_lookup_word(ps, word);
    if (p == NULL)
        return 0;
    free(p);
    return 1;
}

char *omni_ps_pron(ps_decoder_t *ps, const char *word)
{
    return ps_lookup_word(ps, word);
}

int omni_ps_set_words(ps_decoder_t *ps, const char *const *words, int n,
                      const char *probe)
{
    logmath_t *lmath = ps_get_logmath(ps);
    float32 lw = cmd_ln_float32_r(ps_get_config(ps), "-lw");
    fsg_model_t *fsg;
    int i, rc;

    if (n < 2)
        probe = NULL;
    fsg = fsg_model_init(OMNI_SEARCH, lmath, lw, probe ? n + 2 : n + 1);
    if (fsg == NULL)
        return -1;
    fsg->start_state = 0;
    fsg->final_state = n;
    for (i = 0; i < n; i++) {
        int wid = fsg_model_word_add(fsg, words[i]);
        fsg_model_trans_add(fsg, i, i + 1, 0, wid);
    }
    if (probe)
        fsg_model_trans_add(fsg, 1, n + 1, 0, fsg_model_word_add(fsg, probe));
    /* The search takes its own reference (fsg_search_init retains it) and
     * drops it when the search is unset or replaced. */
    rc = ps_set_fsg(ps, OMNI_SEARCH, fsg);
    fsg_model_free(fsg);
    if (rc != 0)
        return -1;
    return ps_set_search(ps, OMNI_SEARCH);
}

void omni_ps_clear_words(ps_decoder_t *ps)
{
    ps_unset_search(ps, OMNI_SEARCH);
}

int omni_ps_decode(ps_decoder_t *ps, const int16 *samples, size_t n, int new_stream)
{
    int rc = 0;

    /* ps_start_utt keeps the noise estimate of -remove_noise (spectral
     * subtraction in the mel energies) from one utterance to the next;
     * only ps_start_stream resets it. Segment frames count from the
     * stream's start, which is then this utterance's. */
    if (new_stream && ps_start_stream(ps) < 0)
        return -1;
    /* A decode fed in blocks switched the feature computation to the
     * running mean for good; this one normalizes by its own mean again. */
    ps_get_feat(ps)->cmn = cmn_type_from_str(cmd_ln_str_r(ps_get_config(ps), "-cmn"));
    if (ps_start_utt(ps) < 0)
        return -1;
    /* All samples in one call with full_utt set: only then does sphinx
     * normalize the cepstra by the utterance's own mean (the model's batch
     * CMN). Fed in blocks, it switches for good to a running mean carried
     * over from earlier utterances. */
    if (ps_process_raw(ps, samples, n, FALSE, TRUE) < 0)
        rc = -1;
    if (ps_end_utt(ps) < 0)
        rc = -1;
    return rc;
}

int omni_ps_cmn_len(ps_decoder_t *ps)
{
    return ps_get_feat(ps)->cmn_struct->veclen;
}

void omni_ps_cmn_get(ps_decoder_t *ps, float *out)
{
    cmn_live_get(ps_get_feat(ps)->cmn_struct, out);
}

int omni_ps_stream_start(ps_decoder_t *ps, const float *prior)
{
    feat_t *f = ps_get_feat(ps);

    if (ps_start_stream(ps) < 0)
        return -1;
    /* The running mean (live CMN) is what a decode fed in blocks uses
     * (feat_cmn switches to it at the first block); ps_start_stream
     * leaves it where the last utterance took it. */
    cmn_live_set(f->cmn_struct, prior);
    f->cmn = CMN_LIVE;
    /* The circular buffer of cepstra that block-by-block features read
     * keeps its positions from one utterance to the next, and the first
     * frames come out differently when they straddle its wraparound (a
     * head fed the same blocks on the same decoder gave other word
     * boundaries at 7 of 400 repetitions): every utterance starts where
     * a new decoder's does. */
    f->bufpos = f->curpos = 0;
    return ps_start_utt(ps) < 0 ? -1 : 0;
}

int omni_ps_stream_feed(ps_decoder_t *ps, const int16 *samples, size_t n)
{
    return ps_process_raw(ps, samples, n, FALSE, FALSE) < 0 ? -1 : 0;
}

int omni_ps_stream_end(ps_decoder_t *ps)
{
    return ps_end_utt(ps) < 0 ? -1 : 0;
}

int omni_ps_segments(ps_decoder_t *ps, omni_segs *out)
{
    ps_seg_t *seg;
    int cap = 0;

    memset(out, 0, sizeof(*out));
    if (ps_get_hyp(ps, NULL) == NULL)
        return -1;
    for (seg = ps_seg_iter(ps); seg != NULL; seg = ps_seg_next(seg)) {
        if (out->n == cap) {
            int ncap = cap ? 2 * cap : 64;
            char **w = realloc(out->words, ncap * sizeof(*w));
            int *sf, *ef;
            if (w != NULL)
                out->words = w;
            sf = realloc(out->sf, ncap * sizeof(*sf));
            if (sf != NULL)
                out->sf = sf;
            ef = realloc(out->ef, ncap * sizeof(*ef));
            if (ef != NULL)
                out->ef = ef;
            if (w == NULL || sf == NULL || ef == NULL) {
                ps_seg_free(seg);
                return -2;
            }
            cap = ncap;
        }
        /* The word string is only valid until ps_seg_next. */
        out->words[out->n] = strdup(ps_seg_word(seg));
        if (out->words[out->n] == NULL) {
            ps_seg_free(seg);
            return -2;
        }
        ps_seg_frames(seg, &out->sf[out->n], &out->ef[out->n]);
        out->n++;
    }
    return 0;
}

void omni_segs_free(omni_segs *s)
{
    int i;
    for (i = 0; i < s->n; i++)
        free(s->words[i]);
    free(s->words);
    free(s->sf);
    free(s->ef);
    memset(s, 0, sizeof(*s));
}
