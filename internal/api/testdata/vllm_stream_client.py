"""A client of vLLM-Omni's streaming speech WebSocket, written for
omnistage's tests from that protocol's description (vLLM-Omni's
serving_speech_stream.py docstring and its example client's documented
command line), so that the tests need neither network nor vLLM-Omni's code.

It behaves as the example client, examples/online_serving/qwen3_tts/
streaming_speech_client.py, does with the same flags: one session.config
(speaker Vivian, task_type CustomVoice, language Auto, response_format wav,
speed 1.0 unless told otherwise), then per --text its text (whole, or word
by word with --simulate-stt) and input.done, reading until session.done;
every sentence's audio is written at its audio.done to
utterance_UUU_sentence_SSS.<format> (pcm also as a 24 kHz .wav), its
timestamps, with --word-timestamps, to ..._timestamps.json; then
session.close. Set OMNISTAGE_VLLM_OMNI_CLIENT to run the example client
itself in its place.
"""

import argparse
import asyncio
import base64
import json
import os
import wave

import websockets


def base_name(ev):
    return "utterance_%03d_sentence_%03d" % (ev["utterance_index"], ev["sentence_index"])


def write_sentence(out_dir, name, fmt, audio):
    if fmt == "pcm":
        with open(os.path.join(out_dir, name + ".pcm"), "wb") as f:
            f.write(audio)
        with wave.open(os.path.join(out_dir, name + ".wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(24000)
            w.writeframes(audio)
        return
    with open(os.path.join(out_dir, name + "." + fmt), "wb") as f:
        f.write(audio)


async def feed(ws, text, word_by_word, delay):
    pieces = [text]
    if word_by_word:
        words = text.split(" ")
        pieces = [w + " " for w in words[:-1]] + [words[-1]]
    for piece in pieces:
        await ws.send(json.dumps({"type": "input.text", "text": piece}))
        if word_by_word:
            await asyncio.sleep(delay)
    await ws.send(json.dumps({"type": "input.done"}))


async def read_utterance(ws, out_dir, fmt, timestamps):
    audio, words, aligned, text = [], [], False, ""
    while True:
        msg = await ws.recv()
        if isinstance(msg, bytes):
            audio.append(msg)
            continue
        ev = json.loads(msg)
        kind = ev.get("type")
        if kind == "audio.start":
            audio, words, aligned, text = [], [], False, ev.get("sentence_text", "")
            print("sentence %d: %r" % (ev["sentence_index"], text))
        elif kind == "audio.chunk":
            audio.append(base64.b64decode(ev["audio_b64"]))
            if ev.get("timestamps") is not None:
                aligned = True
                words.extend(ev["timestamps"])
        elif kind == "audio.done":
            write_sentence(out_dir, base_name(ev), fmt, b"".join(audio))
            if timestamps:
                with open(os.path.join(out_dir, base_name(ev) + "_timestamps.json"), "w", encoding="utf-8") as f:
                    json.dump({"utterance_index": ev["utterance_index"], "sentence_index": ev["sentence_index"],
                               "sentence_text": text, "timestamps": words if aligned else None}, f)
            print("done: %d bytes, error %s" % (ev.get("total_bytes", 0), ev.get("error", False)))
        elif kind == "session.done":
            print("utterance %d: %d sentences" % (ev["utterance_index"], ev["total_sentences"]))
            return
        elif kind == "error":
            print("ERROR: " + ev["message"])
        else:
            print("unknown message: %s" % ev)


async def run(args, config):
    os.makedirs(args.output_dir, exist_ok=True)
    fmt = config.get("response_format", "wav")
    async with websockets.connect(args.url) as ws:
        await ws.send(json.dumps(dict(type="session.config", **config)))
        for text in args.text:
            sender = asyncio.create_task(feed(ws, text, args.simulate_stt, args.stt_delay))
            try:
                await read_utterance(ws, args.output_dir, fmt, bool(config.get("word_timestamps")))
            finally:
                sender.cancel()
                try:
                    await sender
                except asyncio.CancelledError:
                    pass
        await ws.send(json.dumps({"type": "session.close"}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="ws://localhost:8000/v1/audio/speech/stream")
    p.add_argument("--text", required=True, action="append")
    p.add_argument("--output-dir", default="streaming_tts_output")
    p.add_argument("--model")
    p.add_argument("--speaker", default="Vivian")
    p.add_argument("--task-type", default="CustomVoice", choices=["CustomVoice", "VoiceDesign", "Base"])
    p.add_argument("--language", default="Auto")
    p.add_argument("--instructions")
    p.add_argument("--response-format", default="wav", choices=["wav", "pcm", "flac", "mp3", "aac", "opus"])
    p.add_argument("--stream-audio", action="store_true")
    p.add_argument("--word-timestamps", action="store_true")
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--split-granularity", choices=["none", "sentence", "clause"])
    p.add_argument("--simulate-stt", action="store_true")
    p.add_argument("--stt-delay", type=float, default=0.1)
    args = p.parse_args()
    config = {}
    for key in ("model", "speaker", "task_type", "language", "instructions", "response_format",
                "speed", "max_new_tokens", "seed", "split_granularity"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    if args.stream_audio:
        config["stream_audio"] = True
    if args.word_timestamps:
        config.update(word_timestamps=True, stream_audio=True, response_format="pcm")
    asyncio.run(run(args, config))


if __name__ == "__main__":
    main()
