"""Stage: the class a stage program subclasses."""

import inspect

from .wire import DEFAULT_MAX_BATCH, DEFAULT_MAX_JOBS, DEFAULT_WINDOW, PROTOCOL_VERSION


class Stage:
    """A pipeline stage. Subclass it, set input and output (the kinds it
    takes and makes), write process, and pass an instance to run.

    Its life: warm once, before the first job; process once per job, on
    a job thread (up to max_jobs of them at once); close once, when the
    stage stops. A stage that overrides process_batch takes batches
    instead: process_batch runs several jobs of one input chunk each, of
    any requests, in one call (up to max_jobs calls at once).

    Class attributes, all but input and output optional:

    - name: the stage's name in hello (default: the class's, lowercased).
    - input, output: kind names ("text", "audio", "timestamps", "frames",
      "segments", or a kind the pipeline declares).
    - max_jobs (default 1): how many jobs run at once, a thread each.
    - window (default 8): how many input chunks of a job the runtime may
      send ahead of the ones process has taken.
    - max_batch (default 64): the most jobs one process_batch call gets;
      the stage's deploy entry's max_batch (default 8) bounds how many the
      runtime gathers.
    - params: a dict of param name to {"type": ..., "description": ...};
      when given, the runtime refuses a request with any other param.
    - voices: a talker's voices, dicts with id, name, language (BCP 47)
      and optionally gender.
    """

    name = None
    input = None
    output = None
    max_jobs = DEFAULT_MAX_JOBS
    window = DEFAULT_WINDOW
    max_batch = DEFAULT_MAX_BATCH
    params = None
    voices = None

    def check_params(self, params):
        """Raises ParamError(field, reason) for params (a dict) the stage
        refuses. It is called for the runtime's check, on the reader
        thread (so keep it quick), and on each job's thread before
        process."""

    def warm(self, config=None):
        """Loads what the stage needs before its first job; config is the
        stage's options.config (a dict). Override it as warm(self) or
        warm(self, config). An exception refuses to start, with its
        message."""

    def process(self, job):
        """Runs one job: read job.input(), send with job.send. Returning
        ends the job (done); an exception fails it."""
        raise NotImplementedError("%s.process" % type(self).__name__)

    def process_batch(self, jobs):
        """Runs several jobs at once, each one unit of work of a request: a
        job of one input chunk, job.chunk. Override it (instead of
        process) for a model that computes a batch in one call; the
        runtime then gathers the input chunks of concurrent requests into
        batches, as its deploy entry's max_batch and max_batch_delay say,
        and each chunk is one job of a batch.

        Send each job's output with job.send (at most 8 chunks a job; the
        runtime takes them when the call returns). Return None when every
        job is done, or a list with one entry per job, in order: None for
        a job done, or the exception that failed it (ParamError,
        InputError, or any other: the job's 500). An exception raised
        fails every job of the call. Jobs whose params check_params
        refuses, or whose chunk is not of the stage's input kind, fail
        before the call and are not in jobs."""
        raise NotImplementedError("%s.process_batch" % type(self).__name__)

    def close(self):
        """Releases what warm loaded, when the stage stops: once the
        runtime has asked it to shut down (or closed its input) and every
        job has returned, before the program exits. It is called only
        after warm succeeded, and not when the program exits because the
        runtime broke the protocol or a job would not return within the
        shutdown grace (5 s). An exception is logged to standard error."""


def overrides(stage, method):
    """Reports whether stage's class overrides Stage's method."""
    return getattr(type(stage), method, None) is not getattr(Stage, method)


def call_warm(stage, config):
    """Calls stage.warm, with config when it takes an argument."""
    try:
        params = inspect.signature(stage.warm).parameters.values()
    except (TypeError, ValueError):
        return stage.warm(config)
    takes = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)
    return stage.warm(config) if takes else stage.warm()


def hello(stage):
    """Returns stage's hello message, checking its attributes; a TypeError
    or ValueError says what is wrong."""
    for attr in ("input", "output"):
        v = getattr(stage, attr, None)
        if not isinstance(v, str) or not v:
            raise TypeError("%s.%s must be a kind's name, such as \"audio\"; it is %r" % (type(stage).__name__, attr, v))
    msg = {"type": "hello", "protocol": PROTOCOL_VERSION, "name": stage.name or type(stage).__name__.lower(),
           "input": stage.input, "output": stage.output}
    attrs = ("max_jobs", "window")
    if overrides(stage, "process_batch"):
        attrs += ("max_batch",)
    for attr in attrs:
        v = getattr(stage, attr)
        if type(v) is not int or v < 1:
            raise ValueError("%s.%s must be an int, 1 or more; it is %r" % (type(stage).__name__, attr, v))
        msg[attr] = v
    if stage.params is not None:
        if not isinstance(stage.params, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in stage.params.items()):
            raise TypeError("%s.params must be a dict of param name to {\"type\": ..., \"description\": ...}" % type(stage).__name__)
        msg["params"] = stage.params
    if stage.voices is not None:
        if not isinstance(stage.voices, (list, tuple)) or not all(isinstance(v, dict) and "id" in v for v in stage.voices):
            raise TypeError("%s.voices must be a list of dicts with id, name and language" % type(stage).__name__)
        msg["voices"] = list(stage.voices)
    return msg
