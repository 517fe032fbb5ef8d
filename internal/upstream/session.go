package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Session is an MCP session Tollgate opened with the upstream for itself (the annotation
// cache's tools/list, the bridge for 2026-07-28 clients).
type Session struct {
	ID      string          // Mcp-Session-Id the upstream assigned ("" = none)
	Version string          // protocol version for MCP-Protocol-Version ("" = none)
	Result  json.RawMessage // the initialize result
}

// Header is what later requests of the session carry: its id and protocol version.
func (s *Session) Header() http.Header {
	h := http.Header{}
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
	init := jsonrpc.Request(json.RawMessage(`"tollgate-init"`), "initialize", params)
	rep, err := c.Call(ctx, nil, init, nil)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if rep.Msg.Error != nil {
		return nil, fmt.Errorf("initialize: upstream error %s", rep.Msg.Error)
	}
	s := &Session{ID: rep.Header.Get(HeaderSessionID), Version: defaultVersion, Result: rep.Msg.Result}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(rep.Msg.Result, &r) == nil && r.ProtocolVersion != "" {
		s.Version = r.ProtocolVersion
	}
	hdr := s.Header()
	hdr.Set("Accept", "application/json, text/event-stream")
	if resp, err := c.Send(ctx, http.MethodPost, hdr, jsonrpc.Notification("notifications/initialized", nil)); err == nil {
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
