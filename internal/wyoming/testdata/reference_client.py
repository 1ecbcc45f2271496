"""Drives a Wyoming server with the reference library, as Home Assistant's
wyoming integration does, and prints what it heard as one JSON object.

Usage: reference_client.py HOST PORT VOICE TEXT
"""

import asyncio
import hashlib
import json
import sys

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)


async def describe(host, port):
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Describe().event())
        while True:
            event = await client.read_event()
            if Info.is_type(event.type):
                info = Info.from_event(event)
                break
    program = next(tts for tts in info.tts if tts.installed)
    return {
        "program": program.name,
        "streaming": program.supports_synthesize_streaming,
        "voices": [
            {"name": v.name, "languages": v.languages, "description": v.description}
            for v in program.voices
            if v.installed
        ],
    }


async def whole(host, port, voice, text):
    pcm = b""
    rate = None
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        while True:
            event = await client.read_event()
            if event is None:
                return {"error": "connection lost"}
            if AudioStop.is_type(event.type):
                break
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                rate = (chunk.rate, chunk.width, chunk.channels)
                pcm += chunk.audio
    return {"format": rate, "bytes": len(pcm), "sha256": hashlib.sha256(pcm).hexdigest()}


async def streamed(host, port, voice, text):
    client = AsyncTcpClient(host, port)
    await client.connect()
    synth_voice = SynthesizeVoice(name=voice)

    async def write():
        await client.write_event(SynthesizeStart(voice=synth_voice).event())
        message = ""
        for word in text.split(" "):
            piece = word + " "
            message += piece
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(Synthesize(text=message, voice=synth_voice).event())
        await client.write_event(SynthesizeStop().event())

    writer = asyncio.create_task(write())
    starts, pcm, fmt = 0, b"", None
    try:
        while event := await client.read_event():
            if AudioStart.is_type(event.type):
                start = AudioStart.from_event(event)
                fmt = (start.rate, start.width, start.channels)
                starts += 1
            elif AudioChunk.is_type(event.type):
                pcm += AudioChunk.from_event(event).audio
            elif SynthesizeStopped.is_type(event.type):
                break
        else:
            return {"error": "connection lost"}
    finally:
        await writer
        await client.disconnect()
    return {"format": fmt, "starts": starts, "bytes": len(pcm), "sha256": hashlib.sha256(pcm).hexdigest()}


async def main():
    host, port, voice, text = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    print(json.dumps({
        "describe": await describe(host, port),
        "whole": await whole(host, port, voice, text),
        "streamed": await streamed(host, port, voice, text),
    }))


asyncio.run(main())
