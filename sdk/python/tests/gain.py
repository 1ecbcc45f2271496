"""gain: scales audio by the request's "gain" param."""

from array import array

import omnistage_stage as st


def scaled(pcm, gain):
    """Returns 16-bit PCM pcm with every sample times gain, clipped."""
    samples = array("h", pcm)  # 16-bit samples; this machine is little-endian
    for i, s in enumerate(samples):
        samples[i] = max(-32768, min(32767, round(s * gain)))
    return samples.tobytes()


class Gain(st.Stage):
    name = "gain"
    input, output = "audio", "audio"
    max_jobs = 4
    params = {"gain": {"type": "number", "description": "a factor from 0 to 4"}}

    def check_params(self, params):
        gain = params.get("gain", 1)
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 <= gain <= 4:
            raise st.ParamError("gain", "must be between 0 and 4")

    def process(self, job):
        gain = job.params.get("gain", 1)
        for chunk in job.input():
            job.send(st.Audio(chunk.sample_rate, scaled(chunk.pcm, gain), chunk.end_of_sentence))


if __name__ == "__main__":
    st.run(Gain())
