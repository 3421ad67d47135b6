package answer

import (
	"net/http"
	"strconv"
)

// WriteBody answers with a JSON content type when the body looks like JSON.
func WriteBody(w http.ResponseWriter, status int, body string) {
	ct := "text/plain; charset=utf-8"
	for i := 0; i < len(body); i++ {
		if c := body[i]; c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			if c == '{' || c == '[' {
				ct = "application/json"
			}
			break
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
