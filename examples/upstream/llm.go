package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// chat is a stand-in for an LLM API (examples/llm-gateway): POST
// /v1/chat/completions "generates" max_tokens words and reports what the
// request cost, prompt words plus generated words, as usage in the body and
// in the X-Tokens-Used header. With "stream": true the answer is a stream
// of server-sent events, flushed as they go, and the cost, known only at
// the end, comes in the X-Tokens-Used trailer.
//
//	curl -d '{"messages":[{"role":"user","content":"hi there"}],"max_tokens":5}' 127.0.0.1:9001/v1/chat/completions
//	# X-Tokens-Used: 7, {"usage":{"prompt_tokens":2,"completion_tokens":5,"total_tokens":7},...}
//	curl -N --raw -d '{"messages":[...],"max_tokens":5,"stream":true}' 127.0.0.1:9001/v1/chat/completions
type chat struct {
	tokenDelay time.Duration // between streamed chunks (an answer of one chunk is not delayed)
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens *int `json:"max_tokens"`
	Stream    bool `json:"stream"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chunkWords is how many generated words one streamed chunk carries.
const chunkWords = 50

func (c *chat) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/chat/completions", c.serve)
}

func (c *chat) serve(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		chatError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	completion := 16
	if req.MaxTokens != nil {
		completion = *req.MaxTokens
	}
	if completion < 0 || completion > 1_000_000 {
		chatError(w, http.StatusBadRequest, "max_tokens: want 0..1000000")
		return
	}
	if req.Model == "" {
		req.Model = "stand-in"
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	usage := chatUsage{prompt, completion, prompt + completion}
	id := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano())
	total := strconv.Itoa(usage.TotalTokens)

	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Tokens-Used", total)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "length",
				"message": map[string]any{"role": "assistant", "content": words(completion)},
			}},
			"usage": usage,
		})
		return
	}

	// Streamed: the cost is known at the end, so it goes in a trailer,
	// announced before the body.
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Trailer", "X-Tokens-Used")
	flusher, _ := w.(http.Flusher)
	event := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for left := completion; left > 0; left -= chunkWords {
		n := min(left, chunkWords)
		event(map[string]any{
			"id": id, "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": words(n)}}},
		})
		if c.tokenDelay > 0 && left > chunkWords { // between chunks, not after the last
			select {
			case <-time.After(c.tokenDelay):
			case <-r.Context().Done():
				return
			}
		}
	}
	event(map[string]any{
		"id": id, "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "length"}},
		"usage":   usage,
	})
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.Header().Set("X-Tokens-Used", total)
}

// words is n generated words.
func words(n int) string {
	return strings.TrimSuffix(strings.Repeat("word ", n), " ")
}

func chatError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg, "type": "invalid_request_error"}})
}
