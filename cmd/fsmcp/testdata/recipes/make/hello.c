#include <stdio.h>
#include <string.h>

int main(void) {
	char buf[64];
	snprintf(buf, sizeof buf, "hello, %s", "make");
	puts(buf);
	return strcmp(buf, "hello, make") != 0;
}
