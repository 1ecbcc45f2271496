"""The espeak-ng voices the example offers, shared by both stages."""

# id: (name, BCP 47 language). espeak-ng has many more: add any that
# `espeak-ng --voices` lists.
VOICES = {
    "en-us": ("English (America)", "en-US"),
    "en-gb-x-rp": ("English (Received Pronunciation)", "en-GB"),
    "de": ("German", "de-DE"),
    "fr-fr": ("French (France)", "fr-FR"),
    "es": ("Spanish (Spain)", "es-ES"),
    "it": ("Italian", "it-IT"),
    "nl": ("Dutch", "nl-NL"),
    "pl": ("Polish", "pl-PL"),
    "pt": ("Portuguese (Portugal)", "pt-PT"),
    "sv": ("Swedish", "sv-SE"),
}

DEFAULT_VOICE = "en-us"

# espeak-ng's words per minute at speed 1.
BASE_RATE = 175
