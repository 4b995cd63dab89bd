// Command sbbench measures a sandboxd it starts itself against same-run baselines (`sbbench`), and load-tests it with checks (`sbbench load`).
package main
