// Package ocrtest is for tests of OCR: it makes a set of test images of
// known text (Set), scores what a reader makes of them (CER), and runs
// Tesseract 5 as an independent peer to compare with (Tesseract).
//
// The images are made at test time, deterministically from a seed, never
// downloaded: lines and paragraphs of English and Chinese text in
// Debian's DejaVu, Liberation and Noto CJK fonts (fonts-dejavu,
// fonts-liberation, fonts-noto-cjk) at several sizes, on plain and
// textured backgrounds, some turned 180°, blurred, noisy, or
// "photographed" (a slight rotation and perspective, uneven light).
//
// Text is drawn with golang.org/x/image/font/opentype rather than
// ImageMagick: the pixels then depend only on the font files and this
// code (not on ImageMagick's version, its FreeType build or its security
// policy), no process is started, and an image takes milliseconds. The
// perspective warps reuse internal/imaging/cv.
package ocrtest
