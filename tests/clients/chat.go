// One chat call with Go's net/http, run without a module: go run chat.go "Say hi"
// net/http reads HTTPS_PROXY/NO_PROXY (and, on Linux, SSL_CERT_FILE) from eval "$(semula env)".
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	prompt := "Say hi"
	if len(os.Args) > 1 {
		prompt = os.Args[1]
	}
	body, _ := json.Marshal(map[string]any{
		"model":    "gpt-4o-mini",
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	resp, err := http.DefaultClient.Do(req) // DefaultTransport: Proxy = http.ProxyFromEnvironment
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	decision := resp.Header.Get("x-semula-decision")
	if decision == "" {
		decision = "(none: semula not in the path)"
	}
	fmt.Fprintf(os.Stderr, "status %d · x-semula-decision: %s\n", resp.StatusCode, decision)
	fmt.Println(string(answer))
}
