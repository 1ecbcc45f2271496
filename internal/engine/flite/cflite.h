/* cflite.h is the small C layer between Go and flite. Every function returns
 * an OMNI_* code instead of reaching one of flite's exit(255) paths: each
 * relation and feature is checked before it is used, and the Go side
 * validates everything a caller can send before it gets here. */
#ifndef OMNISTAGE_CFLITE_H
#define OMNISTAGE_CFLITE_H

#include <stdint.h>

#include <flite/flite.h>

#define OMNI_OK 0
#define OMNI_ERR_VOICE 1 /* unknown voice index, or wrong voice type for the call */
#define OMNI_ERR_SYNTH 2 /* flite returned no utterance or no wave */
#define OMNI_ERR_EMPTY 3 /* the text produced no words to speak */
#define OMNI_ERR_STOPPED 4 /* the stream's consumer asked synthesis to stop */

/* Voice indices; they match the Go side's voice table. */
#define OMNI_SLT 0
#define OMNI_RMS 1
#define OMNI_AWB 2
#define OMNI_KAL16 3
#define OMNI_NVOICES 4

/* omni_init calls flite_init and registers every voice. Call it once. */
int omni_init(void);

int omni_voice_is_cg(int v);
/* omni_voice_frame_shift is a clustergen voice's frame period in seconds. */
float omni_voice_frame_shift(int v);
/* omni_voice_sample_rate is a clustergen voice's sample rate in Hz. */
int omni_voice_sample_rate(int v);
/* omni_cg_frame_samples is how many samples mlsa_resynthesis makes per
 * frame when frames are shift seconds apart (as its synthesis_body rounds
 * it: 80 for 5 ms at 16 kHz). */
int omni_cg_frame_samples(int v, float shift);
/* omni_voice_dur_stretch is the voice's own duration_stretch (1 if unset). */
float omni_voice_dur_stretch(int v);
/* omni_voice_phones returns the voice's phone names and their count. */
int omni_voice_phones(int v, const char *const **names);

/* omni_split breaks text into utterances as flite's file reader does (the
 * voice's tokenizer and utt_break rule, at most 500 tokens per utterance),
 * and also before a token that would make an utterance longer than
 * max_chars bytes. It writes up to cap [start, end) byte-offset pairs into
 * spans and returns the number of utterances found, which may exceed cap. */
int omni_split(int v, const char *text, int max_chars, int *spans, int cap);

/* omni_talk is the talker's result for one sentence. */
typedef struct {
    cst_utterance *utt;
    cst_track *track; /* mlpg output (owned) or NULL when track_ref is used */
    const cst_track *track_ref; /* the track the vocoder gets */
    const cst_track *str; /* owned by utt; NULL without mixed excitation */
    int nframes, nch, nstr;
    int nseg, ntgt, namebytes;
} omni_talk;

/* omni_talk_cg runs a clustergen voice's synthesis on text up to the
 * vocoder; stretch > 0 overrides duration_stretch on the utterance. */
int omni_talk_cg(int v, const char *text, float stretch, omni_talk *out);
/* omni_talk_frames copies nframes*nch params and nframes*nstr strengths. */
void omni_talk_frames(const omni_talk *t, float *params, float *str);
/* omni_talk_diphone runs a diphone voice's synthesis with a no-op wave
 * synthesis. */
int omni_talk_diphone(int v, const char *text, float stretch, omni_talk *out);
/* omni_talk_segments copies segment names (NUL-terminated, concatenated
 * into namebytes bytes), ends, cluster bits and the pitch targets. */
void omni_talk_segments(const omni_talk *t, char *names, float *ends,
                        unsigned char *cluster, float *pos, float *f0);
void omni_talk_free(omni_talk *t);

/* omni_vocode_cg resynthesizes frames with srand(seed) right before
 * mlsa_resynthesis. str may be NULL when nstr is 0.
 *
 * With stream == 0 it returns the whole wave in *out. Otherwise it streams:
 * each time more than min_buffsize new samples are final, and once at the
 * end for the rest, it calls the Go function omniStreamBlock(stream,
 * samples, n, rate), which must not block; *out stays NULL. When
 * omniStreamBlock returns CST_AUDIO_STREAM_STOP, synthesis stops there and
 * the call returns OMNI_ERR_STOPPED. */
int omni_vocode_cg(int v, const float *params, int nframes, int nch,
                   const float *str, int nstr, float shift, unsigned seed,
                   int min_buffsize, uintptr_t stream, cst_wave **out);
/* omni_vocode_diphone rebuilds Segment and Target relations and runs the
 * diphone voice's unit selection and join. names holds nseg NUL-terminated
 * names back to back. */
int omni_vocode_diphone(int v, const char *names, const float *ends,
                        const unsigned char *cluster, int nseg,
                        const float *pos, const float *f0, int ntgt,
                        unsigned seed, cst_wave **out);

/* omni_synth_text synthesizes text as one utterance, like
 * flite_text_to_wave, after srand(seed). wave_off != 0 replaces the wave
 * synthesis with a no-op (text analysis only) and leaves rand() alone. */
int omni_synth_text(int v, const char *text, unsigned seed, int wave_off,
                    cst_utterance **out);
/* omni_utt_wave returns the utterance's wave or NULL. */
const cst_wave *omni_utt_wave(cst_utterance *u);
/* omni_utt_counts counts the words and the phones under them. */
void omni_utt_counts(cst_utterance *u, int *nwords, int *nphones);
/* omni_utt_words fills, for each word, its name, its start and end in
 * seconds (from the Segment relation; -1 when unknown), its phone count,
 * the name of the token it was made from and that token's number in the
 * utterance (words of one token share it; -1 and NULL when the word has
 * no token); phones receives every word's phone names in order. */
void omni_utt_words(cst_utterance *u, const char **names, float *start,
                    float *end, int *nph, const char **phones,
                    const char **tokens, int *tokid);

/* omni_heap_inuse is the number of bytes malloc has handed out and not
 * had back (glibc mallinfo2), for leak tests. */
size_t omni_heap_inuse(void);

/* omni_reference_wave is srand(seed) then flite_text_to_wave, unguarded:
 * tests compare the engines against it with known-good text only. */
cst_wave *omni_reference_wave(int v, const char *text, unsigned seed);

#endif
