/* csphinx.h is the small C layer between Go and PocketSphinx: decoders
 * for forced alignment and for recognition, the transcript's grammar, a
 * decode of a whole utterance or of one fed block by block, and the word
 * segments of the best hypothesis. */
#ifndef OMNI_CSPHINX_H
#define OMNI_CSPHINX_H

#include <pocketsphinx.h>

/* omni_ps_quiet turns sphinx logging off for the whole process. */
void omni_ps_quiet(void);

/* omni_ps_new creates a decoder for forced alignment with the acoustic
 * model in hmm and the dictionary dict, or returns NULL. */
ps_decoder_t *omni_ps_new(const char *hmm, const char *dict);

/* omni_ps_new_lm creates a decoder for free recognition with the acoustic
 * model in hmm, the n-gram language model lm and the dictionary dict, or
 * returns NULL. */
ps_decoder_t *omni_ps_new_lm(const char *hmm, const char *lm, const char *dict);

/* omni_ps_hyp returns a copy of the best hypothesis of the utterance just
 * ended (words separated by spaces, fillers left out), "" when there is
 * none, or NULL when memory ran out. The caller frees it. */
char *omni_ps_hyp(ps_decoder_t *ps);

/* omni_ps_has_word reports whether word is in the decoder's dictionary. */
int omni_ps_has_word(ps_decoder_t *ps, const char *word);

/* omni_ps_pron returns a copy of word's pronunciation in the dictionary
 * (phones separated by spaces), or NULL. The caller frees it. */
char *omni_ps_pron(ps_decoder_t *ps, const char *word);

/* omni_ps_set_words makes a linear grammar of the n words (every one in
 * the dictionary) the decoder's active search. With probe set (a
 * dictionary word too), the grammar also leads from after the first word,
 * through probe, to a state of its own that goes nowhere and is not
 * final: a hypothesis so far may end there, never the final one. It
 * returns 0 on success. */
int omni_ps_set_words(ps_decoder_t *ps, const char *const *words, int n,
                      const char *probe);

/* omni_ps_clear_words removes the grammar set by omni_ps_set_words. */
void omni_ps_clear_words(ps_decoder_t *ps);

/* omni_ps_decode decodes n samples of 16 kHz audio as one utterance with
 * the grammar set last. With new_stream set, the utterance also starts a
 * new stream: the front end forgets the noise level it estimated from the
 * utterances before. It returns 0, or -1 when a step failed. */
int omni_ps_decode(ps_decoder_t *ps, const int16 *samples, size_t n, int new_stream);

/* omni_ps_cmn_len is the length of the decoder's cepstral mean, and
 * omni_ps_cmn_get copies it into out: right after the decoder is created,
 * the model's -cmninit, the prior omni_ps_stream_start wants. */
int omni_ps_cmn_len(ps_decoder_t *ps);
void omni_ps_cmn_get(ps_decoder_t *ps, float *out);

/* omni_ps_stream_start starts a new stream and, in it, an utterance that
 * omni_ps_stream_feed feeds block by block. Fed in blocks, the cepstra
 * cannot be normalized by the utterance's own mean, which is not known
 * yet: they are normalized by a running mean that starts from prior
 * (weighted as CMN_WIN frames) whatever the decoder heard before, so the
 * same blocks give the same result on any decoder. It returns 0, or -1. */
int omni_ps_stream_start(ps_decoder_t *ps, const float *prior);
/* omni_ps_stream_feed decodes n more samples of 16 kHz audio; the best
 * hypothesis so far is then omni_ps_segments'. It returns 0, or -1. */
int omni_ps_stream_feed(ps_decoder_t *ps, const int16 *samples, size_t n);
/* omni_ps_stream_end ends the utterance (the final hypothesis must reach
 * the grammar's end). It returns 0, or -1. */
int omni_ps_stream_end(ps_decoder_t *ps);

/* omni_segs is a word segmentation: n words with their first and last
 * frames (inclusive). */
typedef struct {
    int n;
    char **words;
    int *sf;
    int *ef;
} omni_segs;

/* omni_ps_segments fills out with the best hypothesis of the utterance
 * just ended, or of the one being fed so far (it then ends with the
 * latest word to have ended, wherever it stands in the grammar). It returns 0, -1 when the decoder has no hypothesis, or -2
 * when memory ran out. The caller frees out with omni_segs_free either way. */
int omni_ps_segments(ps_decoder_t *ps, omni_segs *out);
void omni_segs_free(omni_segs *s);

#endif
