package apijson

// PipelineInfo is the answer of GET /v1/pipeline: the served pipeline's
// route, read-only, for a page that draws it.
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
	Aligner *PipelineAligner `json:"aligner"`
	// Outputs are the output modalities a request may select (audio,
	// timestamps, text): those a route stage returns as its final output.
	Outputs []string `json:"outputs"`
}

// PipelineStage is one declared stage of PipelineInfo.
type PipelineStage struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Engine    string `json:"engine"`
	Placement string `json:"placement"`
	Input     string `json:"input"`
	Output    string `json:"output"`
	// Skipped is true for a stage the route does not run.
	Skipped bool `json:"skipped"`
}

// PipelineAligner is the aligner of PipelineInfo. ID is its stage id, the
// number of declared stages.
type PipelineAligner struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Engine    string `json:"engine"`
	Placement string `json:"placement"`
}
