package tasks

import "strings"

// Owners (docs/contract.md §3, docs/SECURITY.md "Owners"). A task belongs to the caller that
// created it: an identity ("user:…", server.identity_header), a keyed hash of a 2026-07-28
// caller's Authorization credential ("auth:…"), or a legacy MCP session. A 2026-07-28 caller
// with neither is anonymous: it presents Anonymous, and each task it creates gets an owner of
// its own, AnonymousOwner(task id), so anonymous callers never share a list, an event queue or
// a quota: such a task is reachable only through its unguessable id (tasks extension
// "Security Considerations": task ids may be bearer tokens), never listed.

// Anonymous is the owner an anonymous caller presents to the manager.
const Anonymous = "anonymous"

const anonymousPrefix = "anon:"

// IsAnonymous reports whether owner is a task owner created for an anonymous caller.
func IsAnonymous(owner string) bool { return strings.HasPrefix(owner, anonymousPrefix) }

// ownerOf is the owner a new task of a caller presenting owner gets.
func ownerOf(owner, id string) string {
	if owner == Anonymous {
		return anonymousPrefix + id
	}
	return owner
}

// MayAccess reports whether a caller presenting caller may read or change a task owned by
// owner: its own tasks, and for an anonymous caller any anonymous task whose id it holds.
func MayAccess(caller, owner string) bool {
	return caller == owner || (caller == Anonymous && IsAnonymous(owner))
}
