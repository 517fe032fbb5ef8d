package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/sse"
)

// Session is an MCP session Tollgate opened with the upstream for itself (the annotation
// cache's tools/list, the bridge for 2026-07-28 clients).
type Session struct {
	ID      string          // Mcp-Session-Id the upstream assigned ("" = none)
	Version string          // protocol version for MCP-Protocol-Version ("" = none)
	Result  json.RawMessage // the initialize result
	// Extra are end-to-end headers every request of the session carries (a bridged caller's
	// Authorization: an upstream may bind a session to the credential that opened it).
	Extra http.Header
}

// Header is what later requests of the session carry: its id and protocol version.
func (s *Session) Header() http.Header {
	h := s.Extra.Clone()
	if h == nil {
		h = http.Header{}
	}
	if s.Version != "" {
		h.Set(HeaderProtocolVersion, s.Version)
	}
	if s.ID != "" {
		h.Set(HeaderSessionID, s.ID)
	}
	return h
}

// Handshake opens a session (spec 2025-11-25 basic/lifecycle): initialize with params, then
// notifications/initialized. Version is the one the upstream answered, else defaultVersion.
// An upstream JSON-RPC error is an error, like no answer at all.
func (c *Client) Handshake(ctx context.Context, params json.RawMessage, defaultVersion string) (*Session, error) {
	return c.HandshakeWith(ctx, nil, params, defaultVersion)
}

// HandshakeWith is Handshake with extra end-to-end headers, which the session keeps (Extra).
func (c *Client) HandshakeWith(ctx context.Context, extra http.Header, params json.RawMessage, defaultVersion string) (*Session, error) {
	init := jsonrpc.Request(json.RawMessage(`"tollgate-init"`), "initialize", params)
	rep, err := c.Call(ctx, extra, init, nil)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if rep.Msg.Error != nil {
		return nil, fmt.Errorf("initialize: upstream error %s", rep.Msg.Error)
	}
	s := &Session{ID: rep.Header.Get(HeaderSessionID), Version: defaultVersion, Result: rep.Msg.Result, Extra: extra.Clone()}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(rep.Msg.Result, &r) == nil && r.ProtocolVersion != "" {
		s.Version = r.ProtocolVersion
	}
	if resp, err := c.Send(ctx, http.MethodPost, PostHeader(s.Header()), jsonrpc.Notification("notifications/initialized", nil)); err == nil {
		resp.Body.Close()
	}
	return s, nil
}

// EndSession deletes a session the upstream named (spec transports, session management).
func (c *Client) EndSession(s *Session) {
	if s.ID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if resp, err := c.Send(ctx, http.MethodDelete, s.Header(), nil); err == nil {
		resp.Body.Close()
	}
}

// Pages reads a paginated list (spec 2025-11-25 utilities/pagination) with hdr: each page's
// result goes to each, until a page has no nextCursor or maxPages were read (truncated). A
// non-nil meta is sent as every request's params._meta. Request ids are idPrefix + the page.
func (c *Client) Pages(ctx context.Context, hdr http.Header, method, idPrefix string, maxPages int, meta json.RawMessage,
	each func(result json.RawMessage) error) (truncated bool, err error) {
	cursor := json.RawMessage(nil)
	for page := 0; ; page++ {
		if page >= maxPages {
			return true, nil
		}
		params := json.RawMessage(`{}`)
		if cursor != nil {
			params = json.RawMessage(`{"cursor":` + string(cursor) + `}`)
		}
		if meta != nil {
			params, _ = jsonrpc.Replace(params, "_meta", meta)
		}
		id := json.RawMessage(fmt.Sprintf(`"%s%d"`, idPrefix, page))
		rep, err := c.Call(ctx, hdr, jsonrpc.Request(id, method, params), nil)
		if err != nil {
			return false, fmt.Errorf("%s page %d: %w", method, page+1, err)
		}
		if rep.Msg.Error != nil {
			return false, fmt.Errorf("%s page %d: upstream error %s", method, page+1, rep.Msg.Error)
		}
		if err := each(rep.Msg.Result); err != nil {
			return false, fmt.Errorf("%s page %d: %w", method, page+1, err)
		}
		cursor = jsonrpc.Member(rep.Msg.Result, "nextCursor")
		if cursor == nil || string(cursor) == "null" {
			return false, nil
		}
	}
}

// Stream is a session's standalone GET stream (spec 2025-11-25 transports, "Listening for
// Messages from the Server"): the upstream's requests and notifications that belong to no
// request of the client's. Some servers send every server→client request there (mcp-go
// v0.44.0 sends elicitation/create, sampling/createMessage and roots/list nowhere else).
type Stream struct {
	body io.Closer
	r    *sse.Reader
}

// Listen opens the GET stream of the session hdr names (its Mcp-Session-Id and protocol
// version). ctx bounds the whole stream: cancel it to end the stream. An answer that is not
// a 2xx event stream (a server without one answers 405) is a FaultHTTP *Error.
func (c *Client) Listen(ctx context.Context, hdr http.Header) (*Stream, error) {
	h := hdr.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Accept", "text/event-stream")
	h.Del("Content-Type")
	resp, err := c.Send(ctx, http.MethodGet, h, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 || !IsEventStream(resp.Header) {
		resp.Body.Close()
		return nil, HTTPFault(resp.StatusCode)
	}
	return &Stream{body: resp.Body, r: sse.NewReader(resp.Body, int(c.maxReply))}, nil
}

// Next returns the stream's next JSON-RPC message; events that are not one (comments,
// priming events, garbage) are skipped. The error is the stream's end (io.EOF or the cause).
func (s *Stream) Next() (*jsonrpc.Message, error) {
	for {
		ev, err := s.r.Next()
		if err != nil {
			return nil, err
		}
		if !ev.HasData || len(ev.Data) == 0 {
			continue
		}
		if m, err := jsonrpc.Parse(ev.Data); err == nil {
			return m, nil
		}
	}
}

// Close ends the stream and releases its connection.
func (s *Stream) Close() {
	s.r.Close()
	s.body.Close()
}
