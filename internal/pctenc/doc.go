// Package pctenc decodes %XX escapes the lenient way servers do.
package pctenc
