// Package flite holds the flite speech engines, driven in process through
// cgo (cflite.c) against Debian's flite 2.2:
//
//   - flite-talker turns text into one chunk per sentence: clustergen frames
//     for slt, rms and awb (26 parameters and 5 excitation strengths per
//     5 ms frame, after mlpg), diphone segments and pitch targets for kal16.
//   - flite-vocoder turns each chunk into 16 kHz audio as it arrives and
//     sends it in blocks of at most 100 ms (MaxBlockMs) as they are
//     synthesized: mlsa_resynthesis streams them; the diphone join on
//     rebuilt relations makes the sentence at once, then it is cut up.
//
// The split is exact: with the same seed, talker then vocoder give the very
// samples flite_text_to_wave gives for each sentence, once the vocoder's
// blocks are concatenated. Sentences are what flite's own file reader
// makes of the text (its tokenizer and utt_break rule); for text of several
// sentences the reference is therefore flite_text_to_wave on each
// sentence, concatenated, not one call on the whole text, which would be a
// single utterance with other pauses.
//
// # Safety
//
// flite stops the process (exit 255) on some internal errors and trusts its
// inputs. Nothing a caller sends reaches C unchecked: text must be valid
// UTF-8 without NUL and at most MaxTextRunes characters; it is reduced to
// ASCII (accents transliterated, other characters dropped, control
// characters made spaces), tokens longer than 100 characters are broken,
// and sentences longer than 1000 bytes are broken at a token. Frames and
// segments are checked against the voice they name (layout, finite
// values, ranges, order, at most MaxChunkSeconds of speech). The C layer
// checks every relation and feature before it reads one. Bad input is an
// *engine.InputError, bad params an *engine.ParamError.
//
// # Cost
//
// Work is proportional to the speech produced, and digits produce the most
// speech per character: 10000 characters of "99999 " make about 80 minutes
// of speech, about 30 s of clustergen talker time and a minute or more of
// vocoder time. The talker checks for cancellation between sentences, the
// clustergen vocoder between blocks (every 100 ms of audio).
package flite
