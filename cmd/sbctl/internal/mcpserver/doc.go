// Package mcpserver is `sbctl mcp`: sandboxd's tools served over MCP on stdio, one session per
// connection, with the official Go SDK.
package mcpserver
