// Package mcpclient is the load harness's MCP client: streamable HTTP as a real client speaks
// it (initialize, Mcp-Session-Id, JSON or SSE replies), one request at a time per Client.
// It is deliberately independent of Tollgate's own packages so that it measures them from
// the outside.
package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ProtocolVersion is the protocol the harness speaks.
const ProtocolVersion = "2025-11-25"

// NewTransport returns an HTTP transport sized for n concurrent clients to one host.
func NewTransport(n int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        n + 8,
		MaxIdleConnsPerHost: n + 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// Client is one MCP session. It is not safe for concurrent use: a client sends one request
// at a time, as an agent's MCP client does.
type Client struct {
	URL       string
	HTTP      *http.Client
	SessionID string
	nextID    int64
	buf       bytes.Buffer
}

// Reply is one JSON-RPC response and how it arrived.
type Reply struct {
	Result json.RawMessage
	Error  *RPCError
	SSE    bool          // the reply came as text/event-stream
	TTFB   time.Duration // until the first byte of the response body
	Bytes  int           // response body bytes read
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Connect runs the initialize handshake and sends notifications/initialized.
func Connect(ctx context.Context, url string, hc *http.Client) (*Client, error) {
	c := &Client{URL: url, HTTP: hc}
	rep, hdr, err := c.do(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "tollgate-loadtest", "version": "1"},
	})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if rep.Error != nil {
		return nil, fmt.Errorf("initialize: %w", rep.Error)
	}
	c.SessionID = hdr.Get("Mcp-Session-Id")
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return c, nil
}

// Call sends one request and waits for its response (JSON or SSE). A JSON-RPC error is
// returned in Reply.Error, not as err.
func (c *Client) Call(ctx context.Context, method string, params any) (*Reply, error) {
	rep, _, err := c.do(ctx, method, params)
	return rep, err
}

// Notify sends a notification; the server must answer 202.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, _ := json.Marshal(msg)
	resp, err := c.post(ctx, b)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// Close ends the session (DELETE); errors are ignored, as a client exiting would.
func (c *Client) Close() {
	if c.SessionID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", c.SessionID)
	if resp, err := c.HTTP.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.SessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.SessionID)
		req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	}
	return c.HTTP.Do(req)
}

func (c *Client) do(ctx context.Context, method string, params any) (*Reply, http.Header, error) {
	c.nextID++
	id := c.nextID
	c.buf.Reset()
	c.buf.WriteString(`{"jsonrpc":"2.0","id":`)
	c.buf.WriteString(strconv.FormatInt(id, 10))
	c.buf.WriteString(`,"method":`)
	mb, _ := json.Marshal(method)
	c.buf.Write(mb)
	if params != nil {
		c.buf.WriteString(`,"params":`)
		var pb []byte
		switch p := params.(type) {
		case json.RawMessage:
			pb = p
		default:
			var err error
			if pb, err = json.Marshal(p); err != nil {
				return nil, nil, err
			}
		}
		c.buf.Write(pb)
	}
	c.buf.WriteByte('}')

	start := time.Now()
	resp, err := c.post(ctx, c.buf.Bytes())
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, bytes.TrimSpace(b))
	}
	fb := &firstByte{r: resp.Body, start: start}
	rep := &Reply{}
	var raw []byte
	ct := resp.Header.Get("Content-Type")
	if len(ct) >= 17 && ct[:17] == "text/event-stream" {
		rep.SSE = true
		raw, err = readSSEResponse(fb, id)
	} else {
		raw, err = io.ReadAll(fb)
	}
	rep.TTFB, rep.Bytes = fb.ttfb, fb.n
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading reply: %w", method, err)
	}
	if err := decodeResponse(raw, id, rep); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	return rep, resp.Header, nil
}

// decodeResponse checks raw is the response to id and fills rep.
func decodeResponse(raw []byte, id int64, rep *Reply) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("decoding reply: %w", err)
	}
	if string(m.ID) != strconv.FormatInt(id, 10) {
		return fmt.Errorf("reply id %s, want %d", m.ID, id)
	}
	rep.Result, rep.Error = m.Result, m.Error
	return nil
}

// readSSEResponse reads events until one carries the response to id; other messages
// (notifications, server requests) are skipped, as a client would dispatch them elsewhere.
func readSSEResponse(r io.Reader, id int64) ([]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	want := []byte(`"id":` + strconv.FormatInt(id, 10))
	var data []byte
	hasData := false
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 { // end of event
			if hasData && bytes.Contains(data, want) && isResponse(data) {
				return data, nil
			}
			data, hasData = data[:0], false
			continue
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, v...)
			hasData = true
		}
	}
}

func isResponse(b []byte) bool {
	var m struct {
		Method *string `json:"method"`
	}
	return json.Unmarshal(b, &m) == nil && m.Method == nil
}

// readLine returns one line without its LF / CRLF ending, however long it is.
func readLine(br *bufio.Reader) ([]byte, error) {
	var acc []byte
	for {
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			acc = append(acc, frag...)
			continue
		}
		if err != nil {
			return nil, err
		}
		if acc != nil {
			frag = append(acc, frag...)
		}
		frag = bytes.TrimSuffix(frag, []byte("\n"))
		return bytes.TrimSuffix(frag, []byte("\r")), nil
	}
}

// firstByte records when the first body byte arrived.
type firstByte struct {
	r     io.Reader
	start time.Time
	ttfb  time.Duration
	n     int
}

func (f *firstByte) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.n == 0 {
		f.ttfb = time.Since(f.start)
	}
	f.n += n
	return n, err
}
