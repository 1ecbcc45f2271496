// Package talker is the contract of flite-talker's per-request sampling
// params, {"voice", "speed"}: what the engine accepts, and what POST
// /v1/audio/speech, omnistage say and omnistage run send as stage 0's
// params. It has no cgo, so that the HTTP layer and the command line build
// the params without linking flite.
package talker

import "encoding/json"

// Params are the talker's per-request sampling params.
type Params struct {
	// Voice overrides the stage's voice for this request. It must produce
	// the stage's output kind: a clustergen stage cannot switch to kal16.
	Voice string `json:"voice,omitempty"`
	// Speed scales the speaking rate: 1 is flite's normal pace, 2 is twice
	// as fast (half the duration), 0.5 half as fast. It maps to flite's
	// duration_stretch = voice default / speed. Range [MinSpeed, MaxSpeed],
	// as in OpenAI's speech API; absent means 1.
	Speed *float64 `json:"speed,omitempty"`
}

// MinSpeed and MaxSpeed bound Params.Speed.
const (
	MinSpeed float64 = 0.25
	MaxSpeed float64 = 4
)

// SpeedOK reports whether speed is within [MinSpeed, MaxSpeed] (NaN is
// not).
func SpeedOK(speed float64) bool { return speed >= MinSpeed && speed <= MaxSpeed }

// SamplingParams returns a request's sampling_params array of numIDs
// entries (one per stage id, the aligner's included): p as stage 0's, the
// talker's, and null for the others. It returns nil when p is empty, which
// leaves every stage at its defaults. It fails only for a speed JSON
// cannot carry (NaN, ±Inf).
func (p Params) SamplingParams(numIDs int) ([]json.RawMessage, error) {
	if p == (Params{}) {
		return nil, nil
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	params := make([]json.RawMessage, numIDs)
	params[0] = raw
	return params, nil
}
