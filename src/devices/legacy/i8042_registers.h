// i8042 keyboard controller and PS/2 keyboard: status bits, controller and keyboard commands.
#pragma once

#include <cstdint>

namespace tern::i8042 {

// Status register (read from port 0x64).
inline constexpr uint8_t kStatusObf = 0x01;      ///< Output buffer full: port 0x60 has a byte.
inline constexpr uint8_t kStatusIbf = 0x02;      ///< Input buffer full (never: writes are instant).
inline constexpr uint8_t kStatusSys = 0x04;      ///< System flag (CTR bit 2, set by self-test).
inline constexpr uint8_t kStatusCmd = 0x08;      ///< Last write went to port 0x64 (command).
inline constexpr uint8_t kStatusKeylock = 0x10;  ///< Set: keyboard not inhibited.
inline constexpr uint8_t kStatusAuxData = 0x20;  ///< Output byte came from the AUX port.

// Controller configuration byte (CTR, "command byte"), controller RAM byte 0.
inline constexpr uint8_t kCtrKbdInt = 0x01;
inline constexpr uint8_t kCtrAuxInt = 0x02;
inline constexpr uint8_t kCtrSys = 0x04;
inline constexpr uint8_t kCtrKbdDis = 0x10;
inline constexpr uint8_t kCtrAuxDis = 0x20;
inline constexpr uint8_t kCtrXlate = 0x40;  ///< Translate keyboard set 2 to set 1.

// Controller commands (written to port 0x64).
inline constexpr uint8_t kCmdReadRam = 0x20;   ///< 0x20..0x3F: read RAM byte (0x20 = CTR).
inline constexpr uint8_t kCmdWriteRam = 0x60;  ///< 0x60..0x7F: write RAM byte (0x60 = CTR).
inline constexpr uint8_t kCmdAuxDisable = 0xA7;
inline constexpr uint8_t kCmdAuxEnable = 0xA8;
inline constexpr uint8_t kCmdAuxTest = 0xA9;
inline constexpr uint8_t kCmdSelfTest = 0xAA;
inline constexpr uint8_t kCmdKbdTest = 0xAB;
inline constexpr uint8_t kCmdKbdDisable = 0xAD;
inline constexpr uint8_t kCmdKbdEnable = 0xAE;
inline constexpr uint8_t kCmdReadInputPort = 0xC0;
inline constexpr uint8_t kCmdReadOutputPort = 0xD0;
inline constexpr uint8_t kCmdWriteOutputPort = 0xD1;
inline constexpr uint8_t kCmdWriteKbdOutput = 0xD2;  ///< Next data byte appears as keyboard data.
inline constexpr uint8_t kCmdWriteAuxOutput = 0xD3;  ///< Next data byte appears as AUX data.
inline constexpr uint8_t kCmdWriteAux = 0xD4;        ///< Next data byte goes to the AUX device.
inline constexpr uint8_t kCmdReadTestInputs = 0xE0;
inline constexpr uint8_t kCmdPulseOutput = 0xF0;  ///< 0xF0..0xFF: pulse output lines low
                                                  ///< where bits 3:0 are 0; bit 0 = CPU reset.
inline constexpr uint8_t kCmdPulseReset = 0xFE;

// Replies.
inline constexpr uint8_t kSelfTestOk = 0x55;
inline constexpr uint8_t kInterfaceTestOk = 0x00;
inline constexpr uint8_t kAuxClockStuckHigh = 0x02;  ///< AUX test: nothing is connected.

// Output port (0xD0/0xD1).
inline constexpr uint8_t kOutputPortReset = 0x01;  ///< Active low: 0 resets the CPU.
inline constexpr uint8_t kOutputPortA20 = 0x02;

// PS/2 keyboard commands (written to port 0x60) and replies.
inline constexpr uint8_t kKbdSetLeds = 0xED;
inline constexpr uint8_t kKbdEcho = 0xEE;
inline constexpr uint8_t kKbdScanCodeSet = 0xF0;
inline constexpr uint8_t kKbdGetId = 0xF2;
inline constexpr uint8_t kKbdSetTypematic = 0xF3;
inline constexpr uint8_t kKbdEnable = 0xF4;
inline constexpr uint8_t kKbdDisable = 0xF5;
inline constexpr uint8_t kKbdSetDefaults = 0xF6;
inline constexpr uint8_t kKbdResend = 0xFE;
inline constexpr uint8_t kKbdReset = 0xFF;
inline constexpr uint8_t kKbdAck = 0xFA;
inline constexpr uint8_t kKbdBatOk = 0xAA;
inline constexpr uint8_t kKbdIdByte1 = 0xAB;
inline constexpr uint8_t kKbdIdByte2 = 0x83;  ///< MF2 keyboard (0x41 after set-1 translation).

}  // namespace tern::i8042
