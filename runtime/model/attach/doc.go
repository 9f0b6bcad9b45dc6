// Package attach turns what a user attaches to a question — a file path, an
// http(s) URL, a data: URL, or base64 with a media type — into a model.Part, and
// holds the limits every entry point applies to them: the media types accepted,
// the size of one part and of all of a request's parts, and how many there may be.
//
// A part's media type comes from its content (http.DetectContentType) and must
// agree with what its name or its sender declared: a JPEG named photo.png is
// refused rather than sent as what it is not. A URL part stays a URL: the provider
// fetches it, so its bytes are never checked here, only its scheme and its type.
//
// It imports only runtime/model; exec and serve use it, the engine does not (it
// checks the parts it is given against its model, see runtime.Request.Parts).
package attach
