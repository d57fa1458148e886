// Original file: proto/tarcil/v1/scheduler.proto


export interface Locality {
  /**
   * any | pack | spread
   */
  'mode'?: (string);
  /**
   * server | rack
   */
  'scope'?: (string);
  '_mode'?: "mode";
  '_scope'?: "scope";
}

export interface Locality__Output {
  /**
   * any | pack | spread
   */
  'mode'?: (string);
  /**
   * server | rack
   */
  'scope'?: (string);
  '_mode'?: "mode";
  '_scope'?: "scope";
}
