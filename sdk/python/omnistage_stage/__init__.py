"""omnistage_stage: write an omnistage pipeline stage in Python.

A stage program subclasses Stage, and calls run with an instance; the SDK
speaks the stage protocol (docs/stage-protocol.md) with the runtime over
standard input and output. See docs/sdk-python.md.

    import omnistage_stage as st

    class Echo(st.Stage):
        input, output = "audio", "audio"

        def process(self, job):
            for chunk in job.input():
                job.send(chunk)

    st.run(Echo())

A stage whose work runs faster several at once overrides process_batch
instead of process: the runtime then hands it the input chunks of
concurrent requests together, one job each.
"""

from .chunks import Audio, Data, Frames, Image, Regions, Segments, Tensors, Text, Words
from .errors import Cancelled, InputError, ParamError, ProtocolError
from .job import Job
from .server import run
from .speech import Sentences, pcm16, send_pcm, sentences
from .stage import Stage
from .tensors import Tensor
from .vision import Crop, Region
from .wire import PROTOCOL_VERSION

__version__ = "1.0.0"

__all__ = [
    "Audio", "Cancelled", "Crop", "Data", "Frames", "Image", "InputError", "Job", "PROTOCOL_VERSION", "ParamError",
    "ProtocolError", "Region", "Regions", "Segments", "Sentences", "Stage", "Tensor", "Tensors", "Text", "Words",
    "pcm16", "run", "send_pcm", "sentences",
]
