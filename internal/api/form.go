package api

// POST /v1/generate as a multipart form, which carries an image as its
// file.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/omnistage/omnistage/internal/api/imagein"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httperr"
)

// DefaultMaxImageBody bounds a POST /v1/generate body that carries an
// image: the largest image file, in base64, and the rest of the request.
var DefaultMaxImageBody = int64(imagein.MaxBytes)*4/3 + 1<<20

// maxFormField bounds a multipart form's fields other than its file.
const maxFormField = 64 << 10

// isMultipart reports whether r's body is a multipart form.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// readGenerateForm reads a POST /v1/generate multipart form: the image in
// its file field, and the request's other fields as form fields (model,
// output_modalities (repeated, or separated by commas), request_id,
// stream, sampling_params as JSON text).
func readGenerateForm(r *http.Request) (apijson.GenerateRequest, []byte, error) {
	var req apijson.GenerateRequest
	mr, err := r.MultipartReader()
	if err != nil {
		return req, nil, httperr.BadRequest("multipart form: %v", err)
	}
	var image []byte
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return req, nil, formError(err)
		}
		name := part.FormName()
		if name == "file" {
			if image != nil {
				return req, nil, httperr.BadRequest("multipart form: two file fields; send one image")
			}
			if image, err = io.ReadAll(part); err != nil {
				return req, nil, formError(err)
			}
			continue
		}
		value, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
		if err != nil {
			return req, nil, formError(err)
		}
		if len(value) > maxFormField {
			return req, nil, httperr.BadRequest("multipart form: field %q is longer than %d bytes", name, maxFormField)
		}
		if err := setFormField(&req, name, string(value)); err != nil {
			return req, nil, err
		}
	}
	if image == nil {
		return req, nil, httperr.BadRequest(`multipart form: no "file" field: send the image as the form's file field`)
	}
	return req, image, nil
}

// setFormField sets the field name of req from a form's value.
func setFormField(req *apijson.GenerateRequest, name, value string) error {
	switch name {
	case "model":
		req.Model = value
	case "request_id":
		req.RequestID = value
	case "output_modalities":
		for m := range strings.SplitSeq(value, ",") {
			if m = strings.TrimSpace(m); m != "" {
				req.OutputModalities = append(req.OutputModalities, m)
			}
		}
	case "stream":
		return decodeField(&req.Stream, "stream", strings.TrimSpace(value), true)
	case "sampling_params":
		return decodeField(&req.SamplingParams, "sampling_params", value, false)
	default:
		return httperr.BadRequest("multipart form: unknown field %q (fields: file, model, output_modalities, request_id, stream, sampling_params)", name)
	}
	return nil
}

// decodeField decodes a form value as the JSON of the field; quote makes a
// bare word a JSON string first (stream=sse).
func decodeField(dst any, name, value string, quote bool) error {
	if quote && value != "true" && value != "false" && !strings.HasPrefix(value, `"`) {
		value = fmt.Sprintf("%q", value)
	}
	if err := httperr.DecodeJSON(bytes.NewReader([]byte(value)), dst); err != nil {
		return httperr.BadRequest("multipart form: field %s: %v", name, err)
	}
	return nil
}

// formError is a failure reading a multipart form: the body's limit or
// deadline, or a malformed form.
func formError(err error) error {
	var me *http.MaxBytesError
	var he *httperr.Error
	if errors.As(err, &me) || errors.As(err, &he) {
		return err
	}
	return httperr.BadRequest("multipart form: %v", err)
}
