// Package imports holds no code: its tests check that barista's import
// graph is the ladder docs/architecture.md draws, so that it stays one.
//
//	cmd → web → rpc → leader, webhook → raftnode → snapshot → fsm → sfq
//
// A package imports packages of its own rung or below, never above; the
// Go client (client) and the worker (worker) import only the protocol
// (proto) and internal helpers, never a server package, so that a program
// that imports them carries none of the server.
package imports
