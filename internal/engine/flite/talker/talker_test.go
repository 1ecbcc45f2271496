package talker

import (
	"encoding/json"
	"math"
	"testing"
)

func TestSamplingParams(t *testing.T) {
	speed := 1.5
	for _, tc := range []struct {
		name string
		p    Params
		want string // the params as JSON
	}{
		{"empty", Params{}, "null"},
		{"voice", Params{Voice: "rms"}, `[{"voice":"rms"},null,null]`},
		{"speed", Params{Speed: &speed}, `[{"speed":1.5},null,null]`},
		{"both", Params{Voice: "awb", Speed: &speed}, `[{"voice":"awb","speed":1.5},null,null]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.p.SamplingParams(3)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(got); string(b) != tc.want {
				t.Errorf("got %s, want %s", b, tc.want)
			}
		})
	}
	nan := math.NaN()
	if _, err := (Params{Speed: &nan}).SamplingParams(1); err == nil {
		t.Error("a NaN speed made params")
	}
}

func TestSpeedOK(t *testing.T) {
	for s, want := range map[float64]bool{MinSpeed: true, 1: true, MaxSpeed: true, 0.2: false, 4.5: false, 0: false, math.NaN(): false, math.Inf(1): false} {
		if got := SpeedOK(s); got != want {
			t.Errorf("SpeedOK(%g) = %v", s, got)
		}
	}
}
