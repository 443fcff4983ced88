int plugin_answer(void) { return 42; }
