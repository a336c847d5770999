// The C consumer compiled as C++: the header must work in both languages.
#define CONSUMER_NAME cxx_consumer
#include "c_consumer.c"
