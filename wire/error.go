package wire

// ErrorResponse is the body of every error answer of the service's HTTP
// APIs: RFC 9457 problem details (type, title, status, detail), served
// as application/problem+json, with an "error" member that repeats the
// detail for clients written before (it was the whole body then).
type ErrorResponse struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Error says what was wrong, for a human: the detail.
	Error string `json:"error"`
}
