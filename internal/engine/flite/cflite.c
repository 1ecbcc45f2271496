/* cflite.c: see cflite.h. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <flite/flite.h>
#include <flite/cst_cg.h>
#include <flite/cst_diphone.h>
#include <flite/cst_units.h>
#include <flite/cst_phoneset.h>
#include <flite/cst_tokenstream.h>

#include "cflite.h"
#include "_cgo_export.h" /* omniStreamBlock */

/* flite1-dev ships no header for its voices. */
cst_voice *register_cmu_us_slt(const char *voxdir);
cst_voice *register_cmu_us_rms(const char *voxdir);
cst_voice *register_cmu_us_awb(const char *voxdir);
cst_voice *register_cmu_us_kal16(const char *voxdir);

static cst_voice *voices[OMNI_NVOICES];
/* real_wave holds each voice's own wave_synth_func; utterances get a guard
 * in its place that refuses to synthesize an utterance without words. */
static cst_uttfunc real_wave[OMNI_NVOICES];

/* flite stops a whole utterance after 500 tokens (flite_ts_to_speech). */
#define OMNI_MAX_UTT_TOKENS 500

int omni_init(void)
{
    int v;
    const cst_val *w;

    flite_init();
    voices[OMNI_SLT] = register_cmu_us_slt(NULL);
    voices[OMNI_RMS] = register_cmu_us_rms(NULL);
    voices[OMNI_AWB] = register_cmu_us_awb(NULL);
    voices[OMNI_KAL16] = register_cmu_us_kal16(NULL);
    for (v = 0; v < OMNI_NVOICES; v++)
    {
        if (voices[v] == NULL)
            return OMNI_ERR_VOICE;
        w = feat_val(voices[v]->features, "wave_synth_func");
        if (w == NULL)
            return OMNI_ERR_VOICE;
        real_wave[v] = val_uttfunc(w);
        if (omni_voice_is_cg(v) !=
            (feat_present(voices[v]->features, "cg_db") ? 1 : 0))
            return OMNI_ERR_VOICE;
        if (!omni_voice_is_cg(v) &&
            !feat_present(voices[v]->features, "diphone_db"))
            return OMNI_ERR_VOICE;
        if (!feat_present(voices[v]->features, "phoneset"))
            return OMNI_ERR_VOICE;
    }
    return OMNI_OK;
}

static cst_voice *voice(int v)
{
    if (v < 0 || v >= OMNI_NVOICES)
        return NULL;
    return voices[v];
}

int omni_voice_is_cg(int v)
{
    return v == OMNI_SLT || v == OMNI_RMS || v == OMNI_AWB;
}

float omni_voice_frame_shift(int v)
{
    cst_voice *vox = voice(v);
    if (vox == NULL || !omni_voice_is_cg(v))
        return 0;
    return val_cg_db(feat_val(vox->features, "cg_db"))->frame_advance;
}

int omni_voice_sample_rate(int v)
{
    cst_voice *vox = voice(v);
    if (vox == NULL || !omni_voice_is_cg(v))
        return 0;
    return val_cg_db(feat_val(vox->features, "cg_db"))->sample_rate;
}

int omni_cg_frame_samples(int v, float shift)
{
    /* mlsa_resynthesis: framem = 1000 * (times[1] - times[0]) ms, and
     * synthesis_body: framel = (int)(0.5 + framem * fs / 1000). */
    double framem = 1000.0 * shift;
    return (int)(0.5 + (framem * (double)omni_voice_sample_rate(v) / 1000.0));
}

float omni_voice_dur_stretch(int v)
{
    cst_voice *vox = voice(v);
    if (vox == NULL)
        return 1;
    return get_param_float(vox->features, "duration_stretch", 1.0);
}

int omni_voice_phones(int v, const char *const **names)
{
    const cst_phoneset *ps;
    cst_voice *vox = voice(v);
    if (vox == NULL)
        return 0;
    ps = val_phoneset(feat_val(vox->features, "phoneset"));
    *names = ps->phonenames;
    return ps->num_phones;
}

int omni_split(int v, const char *text, int max_chars, int *spans, int cap)
{
    cst_voice *vox = voice(v);
    cst_tokenstream *ts;
    cst_utterance *utt;
    cst_relation *tokrel;
    cst_breakfunc breakfunc = default_utt_break;
    const char *token;
    cst_item *t;
    int n = 0, num_tokens = 0, start = -1, end = -1, tstart, tend;

    if (vox == NULL)
        return -1;
    if (feat_present(vox->features, "utt_break"))
        breakfunc = val_breakfunc(feat_val(vox->features, "utt_break"));
    ts = ts_open_string(text,
        get_param_string(vox->features, "text_whitespace", NULL),
        get_param_string(vox->features, "text_singlecharsymbols", NULL),
        get_param_string(vox->features, "text_prepunctuation", NULL),
        get_param_string(vox->features, "text_postpunctuation", NULL));
    if (ts == NULL)
        return -1;

    /* The loop follows flite_ts_to_speech, recording spans instead of
     * synthesizing. */
    utt = new_utterance();
    tokrel = utt_relation_create(utt, "Token");
    while (!ts_eof(ts) || num_tokens > 0)
    {
        token = ts_get(ts);
        tstart = ts->token_pos;
        tend = tstart + cst_strlen(ts->prepunctuation) + cst_strlen(token) +
               cst_strlen(ts->postpunctuation);
        /* flite's text analysis is quadratic in an utterance's length, so
         * max_chars bounds the work one utterance can cost. */
        if ((cst_strlen(token) == 0) ||
            (num_tokens > OMNI_MAX_UTT_TOKENS) ||
            (start >= 0 && tend - start > max_chars) ||
            (relation_head(tokrel) && breakfunc(ts, token, tokrel)))
        {
            if (start >= 0 && end > start)
            {
                if (n < cap)
                {
                    spans[2 * n] = start;
                    spans[2 * n + 1] = end;
                }
                n++;
            }
            /* flite_ts_to_speech stops here at the end of the stream,
             * which drops a last token that ends the text without
             * trailing whitespace; keep it. */
            if (ts_eof(ts) && cst_strlen(token) == 0)
                break;
            delete_utterance(utt);
            utt = new_utterance();
            tokrel = utt_relation_create(utt, "Token");
            num_tokens = 0;
            start = end = -1;
        }
        num_tokens++;
        t = relation_append(tokrel, NULL);
        item_set_string(t, "name", token);
        item_set_string(t, "whitespace", ts->whitespace);
        item_set_string(t, "prepunctuation", ts->prepunctuation);
        item_set_string(t, "punc", ts->postpunctuation);
        if (start < 0)
            start = tstart;
        end = tend;
    }
    delete_utterance(utt);
    ts_close(ts);
    return n;
}

/* speakable reports whether the utterance has words and a Segment relation
 * with at least one segment besides the leading silence. */
static int speakable(cst_utterance *u)
{
    cst_item *s;
    if (!utt_relation_present(u, "Word") ||
        !utt_relation_present(u, "Segment"))
        return 0;
    if (relation_head(utt_relation(u, "Word")) == NULL)
        return 0;
    s = relation_head(utt_relation(u, "Segment"));
    return s != NULL && item_next(s) != NULL;
}

static cst_utterance *guarded_wave(cst_utterance *u)
{
    int v = get_param_int(u->features, "omni_voice", -1);
    if (voice(v) == NULL || !speakable(u))
    {
        utt_set_feat_int(u, "omni_empty", 1);
        return u;
    }
    return real_wave[v](u);
}

static cst_utterance *guarded_nowave(cst_utterance *u)
{
    if (!speakable(u))
        utt_set_feat_int(u, "omni_empty", 1);
    return u;
}

static int stop_stream(const cst_wave *w, int start, int size, int last,
                       cst_audio_streaming_info *asi)
{
    (void)w; (void)start; (void)size; (void)last; (void)asi;
    return CST_AUDIO_STREAM_STOP;
}

/* run builds and synthesizes one utterance from text. */
static int run(int v, const char *text, float stretch, int wave_off,
               int stop_vocoder, cst_utterance **out)
{
    cst_voice *vox = voice(v);
    cst_utterance *u;
    cst_audio_streaming_info *asi;

    *out = NULL;
    if (vox == NULL)
        return OMNI_ERR_VOICE;
    u = new_utterance();
    utt_set_input_text(u, text);
    utt_init(u, vox);
    utt_set_feat_int(u, "omni_voice", v);
    if (stretch > 0)
        utt_set_feat_float(u, "duration_stretch", stretch);
    if (wave_off)
        utt_set_feat(u, "wave_synth_func", uttfunc_val(&guarded_nowave));
    else
        utt_set_feat(u, "wave_synth_func", uttfunc_val(&guarded_wave));
    if (stop_vocoder)
    {
        /* mlsa_resynthesis calls back after its first frame, which only
         * primes the filter (no samples, no rand()); stopping there leaves
         * param_track and str_track on the utterance for almost no cost. */
        asi = new_audio_streaming_info();
        asi->asc = stop_stream;
        asi->min_buffsize = -1;
        utt_set_feat(u, "streaming_info", audio_streaming_info_val(asi));
    }
    if (utt_synth(u) == NULL)
    {
        delete_utterance(u);
        return OMNI_ERR_SYNTH;
    }
    if (feat_present(u->features, "omni_empty"))
    {
        delete_utterance(u);
        return OMNI_ERR_EMPTY;
    }
    *out = u;
    return OMNI_OK;
}

int omni_talk_cg(int v, const char *text, float stretch, omni_talk *out)
{
    cst_utterance *u;
    cst_cg_db *cg_db;
    const cst_track *pt;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!omni_voice_is_cg(v))
        return OMNI_ERR_VOICE;
    rc = run(v, text, stretch, 0, 1, &u);
    if (rc != OMNI_OK)
        return rc;
    out->utt = u;
    if (!feat_present(u->features, "param_track") ||
        !feat_present(u->features, "cg_db"))
    {
        omni_talk_free(out);
        return OMNI_ERR_SYNTH;
    }
    cg_db = val_cg_db(utt_feat_val(u, "cg_db"));
    pt = val_track(utt_feat_val(u, "param_track"));
    if (cg_db->do_mlpg)
    {
        out->track = mlpg(pt, cg_db);
        out->track_ref = out->track;
    }
    else
        out->track_ref = pt;
    if (cg_db->mixed_excitation)
    {
        if (!feat_present(u->features, "str_track"))
        {
            omni_talk_free(out);
            return OMNI_ERR_SYNTH;
        }
        out->str = val_track(utt_feat_val(u, "str_track"));
        out->nstr = out->str->num_channels;
        if (out->str->num_frames < out->track_ref->num_frames)
        {
            omni_talk_free(out);
            return OMNI_ERR_SYNTH;
        }
    }
    out->nframes = out->track_ref->num_frames;
    out->nch = out->track_ref->num_channels;
    return OMNI_OK;
}

void omni_talk_frames(const omni_talk *t, float *params, float *str)
{
    int i;
    for (i = 0; i < t->nframes; i++)
    {
        memcpy(params + (size_t)i * t->nch, t->track_ref->frames[i],
               sizeof(float) * t->nch);
        if (t->str)
            memcpy(str + (size_t)i * t->nstr, t->str->frames[i],
                   sizeof(float) * t->nstr);
    }
}

int omni_talk_diphone(int v, const char *text, float stretch, omni_talk *out)
{
    cst_utterance *u;
    cst_item *s;
    int rc;

    memset(out, 0, sizeof(*out));
    if (voice(v) == NULL || omni_voice_is_cg(v))
        return OMNI_ERR_VOICE;
    rc = run(v, text, stretch, 1, 0, &u);
    if (rc != OMNI_OK)
        return rc;
    out->utt = u;
    if (!utt_relation_present(u, "Target"))
    {
        omni_talk_free(out);
        return OMNI_ERR_SYNTH;
    }
    for (s = relation_head(utt_relation(u, "Segment")); s; s = item_next(s))
    {
        if (!item_feat_present(s, "end"))
        {
            omni_talk_free(out);
            return OMNI_ERR_SYNTH;
        }
        out->nseg++;
        out->namebytes += cst_strlen(item_name(s)) + 1;
    }
    for (s = relation_head(utt_relation(u, "Target")); s; s = item_next(s))
    {
        if (!item_feat_present(s, "pos") || !item_feat_present(s, "f0"))
        {
            omni_talk_free(out);
            return OMNI_ERR_SYNTH;
        }
        out->ntgt++;
    }
    if (out->ntgt == 0)
    {
        omni_talk_free(out);
        return OMNI_ERR_EMPTY;
    }
    return OMNI_OK;
}

void omni_talk_segments(const omni_talk *t, char *names, float *ends,
                        unsigned char *cluster, float *pos, float *f0)
{
    cst_item *s;
    const char *name;
    size_t n;
    int i;

    /* The cluster bit is get_diphone_units' test for a consonant-cluster
     * diphone: the segment and the next one in its syllable are
     * consonants. */
    for (i = 0, s = relation_head(utt_relation(t->utt, "Segment")); s;
         s = item_next(s), i++)
    {
        name = item_name(s);
        n = strlen(name) + 1;
        memcpy(names, name, n);
        names += n;
        ends[i] = item_feat_float(s, "end");
        cluster[i] = cst_streq("-", ffeature_string(s, "ph_vc")) &&
                     cst_streq("-", ffeature_string(s, "R:SylStructure.n.ph_vc"));
    }
    for (i = 0, s = relation_head(utt_relation(t->utt, "Target")); s;
         s = item_next(s), i++)
    {
        pos[i] = item_feat_float(s, "pos");
        f0[i] = item_feat_float(s, "f0");
    }
}

void omni_talk_free(omni_talk *t)
{
    if (t->track)
        delete_track(t->track);
    if (t->utt)
        delete_utterance(t->utt);
    memset(t, 0, sizeof(*t));
}

/* stream_block is the streaming callback: samples [start, start+size) of
 * w are final, and go to Go at once. */
static int stream_block(const cst_wave *w, int start, int size, int last,
                        cst_audio_streaming_info *asi)
{
    (void)last;
    return omniStreamBlock((uintptr_t)asi->userdata, w->samples + start, size,
                           w->sample_rate);
}

int omni_vocode_cg(int v, const float *params, int nframes, int nch,
                   const float *str, int nstr, float shift, unsigned seed,
                   int min_buffsize, uintptr_t stream, cst_wave **out)
{
    cst_voice *vox = voice(v);
    cst_cg_db *cg_db;
    cst_track *t, *st = NULL;
    cst_audio_streaming_info asi;
    cst_wave *w;
    int i;

    *out = NULL;
    if (vox == NULL || !omni_voice_is_cg(v) || nframes < 1 || nch < 2)
        return OMNI_ERR_VOICE;
    cg_db = val_cg_db(feat_val(vox->features, "cg_db"));
    if (cg_db->mixed_excitation && (str == NULL || nstr != cg_db->ME_num))
        return OMNI_ERR_VOICE;
    t = new_track();
    cst_track_resize(t, nframes, nch);
    for (i = 0; i < nframes; i++)
    {
        t->times[i] = i * shift;
        memcpy(t->frames[i], params + (size_t)i * nch, sizeof(float) * nch);
    }
    if (cg_db->mixed_excitation)
    {
        st = new_track();
        cst_track_resize(st, nframes, nstr);
        for (i = 0; i < nframes; i++)
        {
            st->times[i] = i * shift;
            memcpy(st->frames[i], str + (size_t)i * nstr, sizeof(float) * nstr);
        }
    }
    memset(&asi, 0, sizeof(asi));
    asi.min_buffsize = min_buffsize;
    asi.asc = stream_block;
    asi.userdata = (void *)stream;
    srand(seed);
    w = mlsa_resynthesis(t, st, cg_db, stream ? &asi : NULL, 0);
    delete_track(t);
    if (st)
        delete_track(st);
    if (w == NULL)
        return stream ? OMNI_ERR_STOPPED : OMNI_ERR_SYNTH;
    if (stream)
        delete_wave(w);
    else
        *out = w;
    return OMNI_OK;
}

/* diphone_units is get_diphone_units (flite src/wavesynth/cst_diphone.c)
 * with the consonant-cluster test read from each segment's omni_cluster
 * bit, since the rebuilt utterance has no SylStructure. */
static int diphone_entry(const cst_diphone_db *udb, const char *key)
{
    int start = 0, end = udb->num_entries, mid, c;
    while (start < end)
    {
        mid = (start + end) / 2;
        c = strcmp(udb->diphones[mid].name, key);
        if (c == 0)
            return mid;
        else if (c > 0)
            end = mid;
        else
            start = mid + 1;
    }
    return -1;
}

static void diphone_units(cst_utterance *utt, const cst_diphone_db *udb)
{
    cst_relation *units;
    cst_item *s0, *s1, *u;
    float end0, end1;
    char name[22];
    int e;
    const cst_diphone_entry *d;

    utt_set_feat(utt, "sts_list", sts_list_val(udb->sts));
    units = utt_relation_create(utt, "Unit");
    for (s0 = relation_head(utt_relation(utt, "Segment")); s0 && item_next(s0);
         s0 = s1)
    {
        s1 = item_next(s0);
        e = -1;
        if (item_feat_int(s0, "omni_cluster"))
        {
            cst_sprintf(name, "%.10s_-_%.10s", item_name(s0), item_name(s1));
            e = diphone_entry(udb, name);
        }
        if (e == -1)
        {
            cst_sprintf(name, "%.10s-%.10s", item_name(s0), item_name(s1));
            e = diphone_entry(udb, name);
        }
        if (e == -1)
            e = 0; /* flite's own fallback, after an error message */
        d = &udb->diphones[e];

        u = relation_append(units, NULL);
        item_add_daughter(s0, u);
        item_set_string(u, "name", name);
        end0 = item_feat_float(s0, "end");
        item_set_int(u, "target_end", (int)(end0 * udb->sts->sample_rate));
        item_set_int(u, "unit_entry", e);
        item_set_int(u, "unit_start", d->start_pm);
        item_set_int(u, "unit_end", d->start_pm + d->pb_pm);

        u = relation_append(units, NULL);
        item_add_daughter(s1, u);
        item_set_string(u, "name", name);
        end1 = item_feat_float(s1, "end");
        item_set_int(u, "target_end",
                     (int)(((end0 + end1) / 2.0) * udb->sts->sample_rate));
        item_set_int(u, "unit_entry", e);
        item_set_int(u, "unit_start", d->start_pm + d->pb_pm);
        item_set_int(u, "unit_end", d->start_pm + d->pb_pm + d->end_pm);
    }
}

int omni_vocode_diphone(int v, const char *names, const float *ends,
                        const unsigned char *cluster, int nseg,
                        const float *pos, const float *f0, int ntgt,
                        unsigned seed, cst_wave **out)
{
    cst_voice *vox = voice(v);
    cst_utterance *u;
    cst_relation *r;
    cst_item *it;
    const cst_diphone_db *udb;
    int i;

    *out = NULL;
    if (vox == NULL || omni_voice_is_cg(v) || nseg < 2 || ntgt < 1)
        return OMNI_ERR_VOICE;
    udb = val_diphone_db(feat_val(vox->features, "diphone_db"));
    u = new_utterance();
    utt_init(u, vox);
    r = utt_relation_create(u, "Segment");
    for (i = 0; i < nseg; i++)
    {
        it = relation_append(r, NULL);
        item_set_string(it, "name", names);
        names += strlen(names) + 1;
        item_set_float(it, "end", ends[i]);
        item_set_int(it, "omni_cluster", cluster[i] ? 1 : 0);
    }
    r = utt_relation_create(u, "Target");
    for (i = 0; i < ntgt; i++)
    {
        it = relation_append(r, NULL);
        item_set_float(it, "pos", pos[i]);
        item_set_float(it, "f0", f0[i]);
    }
    diphone_units(u, udb);
    srand(seed); /* some residual codecs add noise with rand() */
    join_units(u);
    if (feat_present(u->features, "wave") && utt_wave(u) != NULL)
        *out = copy_wave(utt_wave(u));
    delete_utterance(u);
    return *out ? OMNI_OK : OMNI_ERR_SYNTH;
}

int omni_synth_text(int v, const char *text, unsigned seed, int wave_off,
                    cst_utterance **out)
{
    if (!wave_off)
        srand(seed);
    return run(v, text, 0, wave_off, 0, out);
}

const cst_wave *omni_utt_wave(cst_utterance *u)
{
    if (!feat_present(u->features, "wave"))
        return NULL;
    return utt_wave(u);
}

static cst_item *first_word(cst_utterance *u)
{
    if (!utt_relation_present(u, "Word") ||
        !utt_relation_present(u, "SylStructure") ||
        !utt_relation_present(u, "Segment"))
        return NULL;
    return relation_head(utt_relation(u, "Word"));
}

static cst_item *word_syls(cst_item *w)
{
    cst_item *ss = item_as(w, "SylStructure");
    return ss ? item_daughter(ss) : NULL;
}

void omni_utt_counts(cst_utterance *u, int *nwords, int *nphones)
{
    cst_item *w, *syl, *seg;
    *nwords = *nphones = 0;
    for (w = first_word(u); w; w = item_next(w))
    {
        (*nwords)++;
        for (syl = word_syls(w); syl; syl = item_next(syl))
            for (seg = item_daughter(syl); seg; seg = item_next(seg))
                (*nphones)++;
    }
}

static float seg_end(const cst_item *w, const char *path)
{
    cst_item *s = path_to_item(w, path);
    if (s == NULL || !item_feat_present(s, "end"))
        return -1;
    return item_feat_float(s, "end");
}

void omni_utt_words(cst_utterance *u, const char **names, float *start,
                    float *end, int *nph, const char **phones,
                    const char **tokens, int *tokid)
{
    cst_item *w, *syl, *seg, *tok, *last = NULL;
    int i = 0, ntok = -1;
    for (w = first_word(u); w; w = item_next(w), i++)
    {
        names[i] = item_name(w);
        tok = utt_relation_present(u, "Token") ? item_parent(item_as(w, "Token")) : NULL;
        if (tok == NULL)
        {
            tokens[i] = NULL;
            tokid[i] = -1;
        }
        else
        {
            if (tok != last)
                ntok++;
            last = tok;
            tokens[i] = item_name(tok);
            tokid[i] = ntok;
        }
        start[i] = seg_end(w, "R:SylStructure.daughter1.daughter1.R:Segment.p");
        end[i] = seg_end(w, "R:SylStructure.daughtern.daughtern.R:Segment");
        nph[i] = 0;
        for (syl = word_syls(w); syl; syl = item_next(syl))
            for (seg = item_daughter(syl); seg; seg = item_next(seg))
            {
                *phones++ = item_name(seg);
                nph[i]++;
            }
    }
}

cst_wave *omni_reference_wave(int v, const char *text, unsigned seed)
{
    if (voice(v) == NULL)
        return NULL;
    srand(seed);
    return flite_text_to_wave(text, voice(v));
}

size_t omni_heap_inuse(void)
{
    return mallinfo2().uordblks;
}
