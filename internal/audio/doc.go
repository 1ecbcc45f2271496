// Package audio holds the signal processing the speech pipeline needs on
// 16-bit mono PCM: rational resampling with exact timing (Resampler),
// loudness measurement and normalization with a peak limiter (Loudness,
// Normalize, ApplyGain), and WAV and raw PCM encoding (WAVHeader, WriteWAV,
// ReadWAV, PCMBytes). It is pure Go.
package audio
