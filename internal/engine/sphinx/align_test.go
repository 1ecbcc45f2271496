package sphinx

import (
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
)

func words(keys ...string) []word {
	out := make([]word, len(keys))
	for i, k := range keys {
		out[i] = word{name: k, key: k, nPhones: 2}
	}
	return out
}

func all(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name    string
		words   []word
		aligned []bool
		segs    []segment
		want    []span
		ok      bool
	}{
		{
			name:  "silences, fillers and alternates",
			words: words("the", "cat", "sat"),
			segs: []segment{
				{"<sil>", 0, 9}, {"the(2)", 10, 19}, {"cat", 20, 39}, {"(NULL)", 40, 40},
				{"[NOISE]", 40, 44}, {"sat", 45, 59}, {"<sil>", 60, 69},
			},
			want: []span{
				{start: 100, end: 200, silBefore: true},
				{start: 200, end: 400, silAfter: true},
				{start: 450, end: 600, silBefore: true, silAfter: true},
			},
			ok: true,
		},
		{
			name:  "no silence at the edges",
			words: words("hi", "there"),
			segs:  []segment{{"hi", 0, 9}, {"(NULL)", 10, 10}, {"there", 10, 29}},
			want:  []span{{start: 0, end: 100, silBefore: true}, {start: 100, end: 300, silAfter: true}},
			ok:    true,
		},
		{
			name:    "unaligned words sit empty at the previous end",
			words:   words("x", "a", "y", "b"),
			aligned: []bool{false, true, false, true},
			segs:    []segment{{"<sil>", 0, 4}, {"a", 5, 9}, {"b", 10, 19}},
			want: []span{
				{start: 0, end: 0},
				{start: 50, end: 100, silBefore: true},
				{start: 100, end: 100},
				{start: 100, end: 200, silAfter: true},
			},
			ok: true,
		},
		{name: "missing word", words: words("a", "b"), segs: []segment{{"a", 0, 9}}},
		{name: "wrong word", words: words("a", "b"), segs: []segment{{"a", 0, 9}, {"c", 10, 19}}},
		{name: "extra word", words: words("a"), segs: []segment{{"a", 0, 9}, {"a", 10, 19}}},
		{name: "only silence", words: words("a"), segs: []segment{{"<sil>", 0, 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aligned := tt.aligned
			if aligned == nil {
				aligned = all(len(tt.words))
			}
			got, ok := place(tt.words, aligned, tt.segs)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("place = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// blocks builds 16 kHz audio from (milliseconds, amplitude) runs.
func blocks(runs ...[2]int) []int16 {
	var out []int16
	for _, r := range runs {
		for range r[0] * decoderRate / 1000 {
			out = append(out, int16(r[1]))
		}
	}
	return out
}

func TestTrim(t *testing.T) {
	// 100 ms silence, 300 ms speech, 100 ms silence, 200 ms speech.
	e := newEnergy(blocks([2]int{100, 0}, [2]int{300, 8000}, [2]int{100, 10}, [2]int{200, 8000}))
	spans := []span{
		{start: 60, end: 430, silBefore: true, silAfter: true},  // 40 ms too early, 30 ms too late
		{start: 480, end: 700, silBefore: true, silAfter: true}, // 20 ms too early
		{start: 420, end: 460, silBefore: true},                 // kept minWordMs long
	}
	trim(spans, e)
	want := []span{
		{start: 100, end: 400, silBefore: true, silAfter: true},
		{start: 500, end: 700, silBefore: true, silAfter: true},
		{start: 430, end: 460, silBefore: true},
	}
	if !reflect.DeepEqual(spans, want) {
		t.Errorf("trim = %+v, want %+v", spans, want)
	}

	// Without a silence beside it, an edge stays, silent or not.
	spans = []span{{start: 0, end: 500}}
	trim(spans, e)
	if spans[0].start != 0 || spans[0].end != 500 {
		t.Errorf("trim moved an edge with no silence beside it: %+v", spans[0])
	}

	// An edge moves at most maxTrimMs.
	e = newEnergy(blocks([2]int{300, 0}, [2]int{200, 8000}))
	spans = []span{{start: 0, end: 500, silBefore: true}}
	trim(spans, e)
	if spans[0].start != maxTrimMs {
		t.Errorf("start moved to %d, want %d", spans[0].start, maxTrimMs)
	}
}

func TestSplit(t *testing.T) {
	e := newEnergy(blocks([2]int{100, 0}, [2]int{600, 8000}, [2]int{300, 0}))
	ws := []word{{name: "a", nPhones: 1}, {name: "b", nPhones: 3}, {name: "c"}, {name: "d", nPhones: 1}}
	got := split(ws, e)
	want := []span{{start: 100, end: 200}, {start: 200, end: 500}, {start: 500, end: 600}, {start: 600, end: 700}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("split = %+v, want %+v", got, want)
	}
	// All silence: the whole duration.
	got = split(ws[:1], newEnergy(make([]int16, 8000)))
	if want := []span{{start: 0, end: 500}}; !reflect.DeepEqual(got, want) {
		t.Errorf("split of silence = %+v, want %+v", got, want)
	}
}

func TestFinish(t *testing.T) {
	ws := words("a", "b", "c", "d")
	spans := []span{{start: -5, end: 100}, {start: 90, end: 80}, {start: 150, end: 400}, {start: 450, end: 500}}
	got := finish(ws, spans, 300)
	want := []engine.Word{
		{Word: "a", StartMs: 0, EndMs: 100},
		{Word: "b", StartMs: 100, EndMs: 100},
		{Word: "c", StartMs: 150, EndMs: 300},
		{Word: "d", StartMs: 300, EndMs: 300},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("finish = %v, want %v", got, want)
	}
}

func TestDictKey(t *testing.T) {
	for name, want := range map[string]string{
		"hello": "hello", "Hello": "hello", "o'clock": "o'clock", "a.m.": "a.m.", "x-ray": "x-ray",
	} {
		if got := dictKey(name, "HH AH"); got != want {
			t.Errorf("dictKey(%q) = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"the(2)", "<sil>", "[noise]", "two words", "", "naïve", strings.Repeat("a", maxKeyLen+1)} {
		got := dictKey(name, "N AY")
		if !strings.HasPrefix(got, "omni-oov-") || !plain(got) {
			t.Errorf("dictKey(%q) = %q, want a plain synthetic key", name, got)
		}
		if dictKey(name, "N AY V") == got {
			t.Errorf("dictKey(%q) does not depend on the phones", name)
		}
	}
}

func TestToARPAbet(t *testing.T) {
	got, ok := toARPAbet([]string{"pau", "hh", "ax", "l", "ow", "axr", "el", "dx", "pau"})
	if want := []string{"HH", "AH", "L", "OW", "ER", "AH", "L", "D"}; !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("toARPAbet = %v, %v; want %v", got, ok, want)
	}
	if _, ok := toARPAbet([]string{"hh", "qq"}); ok {
		t.Error("toARPAbet accepted an unknown phone")
	}
	if _, ok := toARPAbet([]string{"pau"}); ok {
		t.Error("toARPAbet accepted a pause alone")
	}
}

// TestPhoneSets checks the mapping against both phone sets: flite's
// analysis of varied text yields only phones it knows, and every phone it
// maps to is one the acoustic model has (ps_add_word refuses others).
func TestPhoneSets(t *testing.T) {
	text := "Yesterday, the hungry zookeeper bought thirty-three jugs of beige yoghurt; " +
		"Vivian's measure of joy and the butter shipment annoyed Ursula. Button, kitten, rhythm, prism, " +
		"ahh, whether, ouch, boy, cow, treasure, thing, singer, bottle, water, winner, behind."
	seen := map[string]bool{}
	for _, voice := range flite.Voices() {
		prons, err := flite.Analyze(text, voice)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range prons {
			for _, ph := range p.Phones {
				seen[ph] = true
			}
			if _, ok := toARPAbet(p.Phones); !ok {
				t.Errorf("%s: %q has phones %v that do not map", voice, p.Word, p.Phones)
			}
		}
	}
	t.Logf("flite used %d phones", len(seen))

	d, err := newDecoder(DefaultModel, DefaultDict)
	if err != nil {
		t.Fatal(err)
	}
	defer d.free()
	for ph, arpa := range arpabet {
		if len(arpa) == 0 {
			continue
		}
		if err := d.addWord("omni-phone-"+ph, strings.Join(arpa, " ")); err != nil {
			t.Errorf("flite %q → %v: %v", ph, arpa, err)
		}
	}
}
