// SPDX-License-Identifier: BSD-3-Clause
int plugin_answer(void) { return 42; }
