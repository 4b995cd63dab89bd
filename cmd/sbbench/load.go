package main

func runLoad(args []string) int { return 0 }
