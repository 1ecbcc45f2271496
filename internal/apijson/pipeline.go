package apijson

// The served pipeline's route as JSON: GET /v1/pipeline, and omnistage
// route --json.

import "github.com/omnistage/omnistage/internal/pipeline"

// PipelineInfo is a pipeline's resolved route, read-only: the answer of GET
// /v1/pipeline (for a page that draws it) and what omnistage route --json
// prints. DescribePipeline builds it.
type PipelineInfo struct {
	// Name is the pipeline's name, the model of its speech requests.
	Name string `json:"name"`
	// Route is the ids of the pipeline stages a request runs, in order,
	// without the aligner.
	Route []int `json:"route"`
	// Stages is every declared stage, in id order, the skipped ones
	// included; the aligner is not among them.
	Stages []PipelineStage `json:"stages"`
	// Aligner is the forced aligner after the route's tail; null when the
	// pipeline has none.
	Aligner *PipelineStage `json:"aligner"`
	// Outputs are the output modalities a request may select (audio,
	// timestamps, text): those a route stage returns as its final output.
	Outputs []string `json:"outputs"`
}

// PipelineStage is one stage of PipelineInfo: a declared stage, or the
// aligner (whose id is the number of declared stages, its input audio and
// its output timestamps).
type PipelineStage struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Engine    string `json:"engine"`
	Placement string `json:"placement"`
	Input     string `json:"input"`
	Output    string `json:"output"`
	// Skipped is true for a stage the route does not run.
	Skipped bool `json:"skipped"`
	// Upstream and Downstream are the stages before and after this one on
	// the route (the tail's downstream is the aligner); null at the ends of
	// the route and for a skipped stage.
	Upstream   *int `json:"upstream"`
	Downstream *int `json:"downstream"`
}

// DescribePipeline returns what GET /v1/pipeline and omnistage route
// --json tell of cfg: the route, every declared stage with its engine,
// placement, kinds and neighbours on the route, the aligner, and the
// outputs a request may select.
func DescribePipeline(cfg *pipeline.Config) PipelineInfo {
	r := cfg.Route
	info := PipelineInfo{Name: cfg.Pipeline.Name, Route: r.Order(), Stages: []PipelineStage{}, Outputs: r.Outputs()}
	for id := range cfg.Pipeline.NumStages() {
		info.Stages = append(info.Stages, describeStage(cfg, id))
	}
	if id, ok := r.Aligner(); ok {
		a := describeStage(cfg, id)
		info.Aligner = &a
	}
	return info
}

// describeStage describes stage id of cfg, the aligner included.
func describeStage(cfg *pipeline.Config, id int) PipelineStage {
	r := cfg.Route
	eng, spec := cfg.StageSpec(id, 0)
	s := PipelineStage{
		ID: id, Name: cfg.StageName(id), Engine: eng, Placement: string(cfg.Deploy.Stages[id].Placement),
		Input: string(spec.Input), Output: string(spec.Output), Skipped: !r.OnRoute(id),
	}
	if up, ok := r.Upstream(id); ok {
		s.Upstream = &up
	}
	if down, ok := r.Downstream(id); ok {
		s.Downstream = &down
	}
	return s
}
